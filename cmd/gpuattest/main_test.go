package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/initgc"
	"github.com/gpuattest/gpuattest/internal/k8stest"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/internal/testenv"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain is the test binary's main, and also gpuattest's when a script
// runs it: it gives the collector back first, as main does. Without it
// internal/initgc's hold lasts the whole test process, whose heap then
// only grows (23 GB and a machine swapping after an hour of tests).
func TestMain(m *testing.M) {
	initgc.Restore()
	testscript.Main(kubeMain{m}, map[string]func(){
		"gpuattest": func() {
			limits.SetSoftMemoryLimit()
			os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// kubeMain runs the tests with one Kubernetes control plane for the
// package (k8stest.Main), started by the first test that asks for it.
type kubeMain struct{ m *testing.M }

func (k kubeMain) Run() int { return k8stest.Main(k.m, kubeNodes...) }

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup:               scriptSetup,
		Condition:           scriptCondition,
		Cmds:                scriptCmds,
	})
}

// scriptCondition adds [tool:NAME], true when NAME is in the scripts'
// PATH, and [cluster:slurm] and [cluster:kube], true when that harness can
// start here. Under CI=true a missing tool or harness is an error, so a
// script guarded by it cannot pass by skipping.
func scriptCondition(cond string) (bool, error) {
	if name, ok := strings.CutPrefix(cond, "cluster:"); ok {
		return clusterCondition(name)
	}
	name, ok := strings.CutPrefix(cond, "tool:")
	if !ok {
		return false, fmt.Errorf("unknown condition %q: expected tool:NAME or cluster:slurm|kube", cond)
	}
	if !inScriptPATH(name) {
		if testenv.InCI() {
			return false, fmt.Errorf("CI=true but %s is not in PATH (hint: .ci/install installs it)", name)
		}
		return false, nil
	}
	return true, nil
}

// scriptSetup passes the tool-presence policy (CI), caches and the
// script's testing.TB (for the cluster commands) into scripts, and a git
// identity; $REPO is
// the repository's root, $EXAMPLE the CMake example's directory.
func scriptSetup(env *testscript.Env) error {
	for _, k := range []string{"CI", "HOME", "GOCACHE", "DOCKER_HOST", "GPUATTEST_TEST_CACHE", "GPUATTEST_K8S_BIN"} {
		if v, ok := os.LookupEnv(k); ok {
			env.Setenv(k, v)
		}
	}
	env.Setenv("PATH", scriptPATH())
	env.Setenv("XDG_CACHE_HOME", env.WorkDir+"/.cache")
	// git commits with a fixed identity and no user or system config
	// (no signing hooks).
	for k, v := range map[string]string{"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
		"GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.DevNull, "GIT_CONFIG_NOSYSTEM": "1"} {
		env.Setenv(k, v)
	}
	tb, ok := env.T().(testing.TB)
	if !ok {
		return fmt.Errorf("testscript gave a %T, not a testing.TB", env.T())
	}
	env.Values[tbKey{}] = tb
	repo, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	env.Setenv("REPO", repo)
	env.Setenv("EXAMPLE", filepath.Join(repo, "pipelines", "examples", "cmake"))
	return nil
}
