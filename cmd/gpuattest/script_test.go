package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/k8stest"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
	"github.com/gpuattest/gpuattest/internal/slurmtest"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/runner"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the commands the scripts in testdata/script get beside
// testscript's own (docs/testing.md lists them with their usage).
var scriptCmds = map[string]func(*testscript.TestScript, bool, []string){
	"registry":   cmdRegistry,
	"fixture":    cmdFixture,
	"exits":      cmdExits,
	"capture":    cmdCapture,
	"envsubst":   cmdEnvsubst,
	"jsonpath":   cmdJSONPath,
	"statements": cmdStatements,
	"slurm":      cmdSlurm,
	"kube":       cmdKube,
}

// tbKey is the Env.Values key of the script's testing.TB, for the
// harnesses that take one (k8stest.Shared, testenv.DirOutside).
type tbKey struct{}

// scriptTB returns the running script's testing.TB.
func scriptTB(ts *testscript.TestScript) testing.TB {
	tb, ok := ts.Value(tbKey{}).(testing.TB)
	if !ok {
		ts.Fatalf("no testing.TB for this script (scriptSetup stores it)")
	}
	return tb
}

// noNeg refuses "! name" for a command whose failure a script must not
// expect.
func noNeg(ts *testscript.TestScript, neg bool, name string) {
	if neg {
		ts.Fatalf("%s does not take !", name)
	}
}

// cmdRegistry starts a registry on 127.0.0.1 for the rest of the script
// and puts its host:port in $VAR: go-containerregistry's in-process
// registry (referrers API), or with -docker Debian's docker-registry (tag
// schema), whose storage directory goes in $VAR_STORAGE. Guard -docker
// with [tool:docker-registry].
//
//	registry [-docker] VAR
func cmdRegistry(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "registry")
	docker := len(args) > 0 && args[0] == "-docker"
	if docker {
		args = args[1:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: registry [-docker] VAR")
	}
	if !docker {
		host, stop := registrytest.ServeInProcess(nil)
		ts.Defer(stop)
		ts.Setenv(args[0], host)
		return
	}
	d, stop, err := registrytest.ServeDocker(ts.MkAbs(".registry-" + args[0]))
	ts.Check(err)
	ts.Defer(stop)
	ts.Setenv(args[0], d.Host)
	ts.Setenv(args[0]+"_STORAGE", d.Storage)
}

// cmdFixture writes a signed fixture run (internal/runfixture: nothing is
// built, the artifacts are pseudo-random bytes of the given sizes) into
// RUNDIR, its pipeline into ROOT, signed with KEY (a key without a
// password). -tests adds a passed test step with those cases,
// -failed-exec an exec step of that id that failed, -simulated a
// simulated H100.
//
//	fixture [-tests CASE,...] [-failed-exec ID] [-simulated] KEY ROOT RUNDIR NAME:SIZE...
func cmdFixture(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "fixture")
	fs := flag.NewFlagSet("fixture", flag.ContinueOnError)
	fs.SetOutput(ts.Stderr())
	tests := fs.String("tests", "", "")
	failed := fs.String("failed-exec", "", "")
	simulated := fs.Bool("simulated", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() < 4 {
		ts.Fatalf("usage: fixture [-tests CASE,...] [-failed-exec ID] [-simulated] KEY ROOT RUNDIR NAME:SIZE... (%v)", err)
	}
	var opts []runfixture.Option
	if *tests != "" {
		opts = append(opts, runfixture.WithTestCases(strings.Split(*tests, ",")...))
	}
	if *failed != "" {
		opts = append(opts, runfixture.WithFailedExec(*failed))
	}
	if *simulated {
		opts = append(opts, runfixture.WithSimulatedGPU())
	}
	var files []runfixture.File
	for _, a := range fs.Args()[3:] {
		name, size, ok := strings.Cut(a, ":")
		n, err := strconv.ParseInt(size, 10, 64)
		if !ok || err != nil {
			ts.Fatalf("fixture: %q: expected NAME:SIZE", a)
		}
		files = append(files, runfixture.File{Name: name, Size: n})
	}
	kp, err := sign.LoadPrivateKey(ts.MkAbs(fs.Arg(0)), nil)
	ts.Check(err)
	s, err := sign.NewKeySigner(kp)
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = runfixture.Write(ctx, ts.MkAbs(fs.Arg(1)), ts.MkAbs(fs.Arg(2)), files, s, opts...)
	ts.Check(err)
}

// cmdExits runs PROG as exec does and fails unless it exits with status
// N: the exit codes are part of the CLI's contract (docs/exit-codes.md),
// and "! exec" only says "not 0".
//
//	exits N PROG [ARGS...]
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "exits")
	if len(args) < 2 {
		ts.Fatalf("usage: exits N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// cmdCapture sets $VAR to the first group of REGEXP's first match in
// FILE (stdout when not given; the whole match when REGEXP has no
// group), for a later command's arguments (the digest push printed).
//
//	capture VAR REGEXP [FILE]
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "capture")
	if len(args) != 2 && len(args) != 3 {
		ts.Fatalf("usage: capture VAR REGEXP [FILE]")
	}
	file := "stdout"
	if len(args) == 3 {
		file = args[2]
	}
	re, err := regexp.Compile(`(?m)` + args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile(file))
	if m == nil {
		ts.Fatalf("capture: no match for %q in %s", args[1], file)
	}
	ts.Setenv(args[0], m[len(m)-1])
}

// cmdEnvsubst replaces ${VAR} in FILE, for each VAR named, with its
// value: a pipeline file that names a pushed release by digest. Other
// $ signs are left alone (a step's shell needs them).
//
//	envsubst FILE VAR...
func cmdEnvsubst(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "envsubst")
	if len(args) < 2 {
		ts.Fatalf("usage: envsubst FILE VAR...")
	}
	s := ts.ReadFile(args[0])
	for _, v := range args[1:] {
		s = strings.ReplaceAll(s, "${"+v+"}", ts.Getenv(v))
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(s), 0o644))
}

// cmdJSONPath prints, for each PATH, "PATH: VALUE" with VALUE the compact
// JSON at that path of FILE's document (stdout for the last command's):
// PATH is dot-separated object keys and array indexes, and # is the
// length of an array or object. A script then cmps the lines with the
// expected ones, which checks a JSON answer as strictly as a decoded
// struct did.
//
//	jsonpath FILE PATH...
func cmdJSONPath(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "jsonpath")
	if len(args) < 2 {
		ts.Fatalf("usage: jsonpath FILE PATH...")
	}
	var doc any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &doc))
	for _, p := range args[1:] {
		v, err := jsonAt(doc, p)
		if err != nil {
			ts.Fatalf("jsonpath %s: %v", p, err)
		}
		b, err := json.Marshal(v)
		ts.Check(err)
		fmt.Fprintf(ts.Stdout(), "%s: %s\n", p, b)
	}
}

// jsonAt walks path (dot-separated keys, indexes and #) down v.
func jsonAt(v any, path string) (any, error) {
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			if seg == "#" {
				v = len(x)
				continue
			}
			next, ok := x[seg]
			if !ok {
				return nil, fmt.Errorf("no key %q", seg)
			}
			v = next
		case []any:
			if seg == "#" {
				v = len(x)
				continue
			}
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("%q: not an index of an array of %d", seg, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("%q: %v is not an object or an array", seg, v)
		}
	}
	return v, nil
}

// cmdStatements prints, as one indented JSON array, the in-toto
// statements of predicate type TYPE in FILE (a Sigstore bundle or a DSSE
// envelope a line, as attestations.intoto.jsonl holds and cosign
// verify-attestation prints), unverified: the script checks their content
// with jsonpath or stdout after verify or cosign has checked their
// signatures.
//
//	statements FILE TYPE
func cmdStatements(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "statements")
	if len(args) != 2 {
		ts.Fatalf("usage: statements FILE TYPE")
	}
	sts := []*attest.Statement{}
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(ts.ReadFile(args[0]))), []byte("\n")) {
		st, err := sign.UnverifiedStatement(line)
		if err != nil {
			st, err = envelopeStatement(line)
		}
		ts.Check(err)
		if st.PredicateType == args[1] {
			sts = append(sts, st)
		}
	}
	b, err := json.MarshalIndent(sts, "", "  ")
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%s\n", b)
}

// envelopeStatement decodes the in-toto statement of a DSSE envelope.
func envelopeStatement(line []byte) (*attest.Statement, error) {
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     []byte `json:"payload"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("neither a bundle nor a DSSE envelope: %w", err)
	}
	if env.PayloadType != "application/vnd.in-toto+json" {
		return nil, fmt.Errorf("DSSE payload type %q: expected application/vnd.in-toto+json", env.PayloadType)
	}
	var st attest.Statement
	if err := json.Unmarshal(env.Payload, &st); err != nil {
		return nil, fmt.Errorf("decoding the DSSE payload: %w", err)
	}
	return &st, nil
}

// cmdSlurm starts a local Slurm (internal/slurmtest, its default node:
// one A100 and one H100, features sm_80 and sm_90) for the rest of the
// script: $SLURM_CONF points the clients and gpuattest at it, $SHARED is
// a new directory outside the scratch file systems a node's sandbox
// replaces (a fleet's sharedDir). Guard it with [cluster:slurm].
//
//	slurm
func cmdSlurm(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "slurm")
	if len(args) != 0 {
		ts.Fatalf("usage: slurm")
	}
	c, stop, err := slurmtest.Serve(nil)
	ts.Check(err)
	ts.Defer(stop)
	ts.Setenv("SLURM_CONF", c.Conf)
	ts.Setenv("SHARED", testenv.DirOutside(scriptTB(ts), "fleet-script-", runner.SandboxScratch))
}

// cmdKube gives the script a namespace of the package's Kubernetes
// control plane (k8stest.Shared, started by the first test that asks, with
// kubeNodes): $KUBECONFIG is the namespace's restricted user's (it may
// create Jobs and Secrets there and nothing else), $KUBE_ADMIN_CONFIG the
// admin's, $KUBE_NAMESPACE the namespace. No kubelet runs pods: the
// control plane's nodes are kwok's. Guard it with [cluster:kube].
//
//	kube
func cmdKube(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "kube")
	if len(args) != 0 {
		ts.Fatalf("usage: kube")
	}
	c := k8stest.Shared(scriptTB(ts))
	ts.Setenv("KUBECONFIG", c.Restricted.Kubeconfig)
	ts.Setenv("KUBE_ADMIN_CONFIG", c.Kubeconfig)
	ts.Setenv("KUBE_NAMESPACE", c.Namespace)
}

// clusterCondition is [cluster:slurm] and [cluster:kube]: true when the
// harness can start here; false when it cannot, or an error under CI=true
// (and for Kubernetes GPUATTEST_K8S=1), as the Go tests' Require does.
func clusterCondition(name string) (bool, error) {
	var reason string
	strict := testenv.InCI()
	switch name {
	case "slurm":
		reason = slurmtest.Unavailable()
	case "kube":
		if _, err := k8stest.Bin(); err != nil {
			reason = err.Error()
		}
		strict = strict || os.Getenv("GPUATTEST_K8S") == "1"
	default:
		return false, fmt.Errorf("unknown cluster %q: expected slurm or kube", name)
	}
	if reason == "" {
		return true, nil
	}
	if strict {
		return false, fmt.Errorf("CI=true but %s (hint: .ci/install installs it)", reason)
	}
	return false, nil
}

// scriptPATH is the scripts' PATH: the test's, then $GOPATH/bin, where
// `go install` puts cosign and oras (testenv.RequireGoTool looks there).
func scriptPATH() string {
	bin := filepath.Join(filepath.SplitList(build.Default.GOPATH)[0], "bin")
	return os.Getenv("PATH") + string(os.PathListSeparator) + bin
}

// inScriptPATH reports whether name is an executable in scriptPATH.
func inScriptPATH(name string) bool {
	for _, dir := range filepath.SplitList(scriptPATH()) {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
