package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gpuattest": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup:               scriptSetup,
	})
}

// scriptSetup passes the tool-presence policy (CI) and caches into scripts.
func scriptSetup(env *testscript.Env) error {
	for _, k := range []string{"CI", "PATH", "HOME", "GOCACHE", "DOCKER_HOST"} {
		if v, ok := os.LookupEnv(k); ok {
			env.Setenv(k, v)
		}
	}
	env.Setenv("XDG_CACHE_HOME", env.WorkDir+"/.cache")
	return nil
}
