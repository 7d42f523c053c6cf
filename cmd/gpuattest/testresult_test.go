package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// TestTestResultInterop: a signed run with a test step carries an in-toto
// test-result v0.1 statement beside the validation statement; pushed to
// docker-registry, cosign verify-attestation --type test-result accepts
// it, and gpuattest verify REF --predicate-type test-result judges it
// with the Conforma-style policy of the docs (and fails a rule that does
// not hold).
func TestTestResultInterop(t *testing.T) {
	t.Parallel()
	cosign := testenv.RequireGoTool(t, "cosign")
	dir := t.TempDir()
	keys, err := sign.GenerateKeyPair(filepath.Join(dir, "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadPrivateKey(keys.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	if _, err := runfixture.Write(t.Context(), filepath.Join(dir, "root"), runDir, []runfixture.File{{Name: "build/a.fatbin", Size: 4096}}, s,
		runfixture.WithTestCases("vector_add/n=1024", "softmax/rows=8")); err != nil {
		t.Fatal(err)
	}
	docker := registrytest.StartDocker(t)
	byDigest := push(t, runDir, docker.Host+"/kernels:v1")

	out, err := tool(t, t.TempDir(), cosign, "verify-attestation", "--new-bundle-format", "--key", keys.Public,
		"--type", attest.TestResultPredicateType, "--insecure-ignore-tlog", "--allow-http-registry", byDigest)
	if err != nil || !strings.Contains(strings.ToLower(out), "verified") {
		t.Fatalf("cosign verify-attestation --type %s %s: %v\n%s", attest.TestResultPredicateType, byDigest, err, out)
	}
	if !cosignPrinted(out, `"passedTests":["vector_add/n=1024","softmax/rows=8"]`) {
		t.Errorf("cosign printed no test-result statement with the cases:\n%s", out)
	}

	policyFile, err := filepath.Abs("../../docs/examples/test-result-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := cli(t, "verify", byDigest, "--key", keys.Public, "--predicate-type", attest.TestResultPredicateType, "--policy", policyFile)
	if code != 0 || !strings.Contains(stdout, "Verified OK") || !strings.Contains(stdout, "test_result.passed") {
		t.Fatalf("verify --predicate-type test-result: exit %d\n%s%s", code, stdout, errOut)
	}
	strict := filepath.Join(dir, "strict.yaml")
	if err := os.WriteFile(strict, []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: sgemm tested\n    expr: '\"sgemm/m=128\" in predicate.passedTests'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := cli(t, "verify", byDigest, "--key", keys.Public, "--predicate-type", attest.TestResultPredicateType, "--policy", strict); code != exitPolicy || !strings.Contains(stdout, "sgemm tested") {
		t.Errorf("verify with a rule that does not hold: exit %d, want %d\n%s", code, exitPolicy, stdout)
	}
}

// cosignPrinted reports whether a DSSE envelope cosign printed (one JSON
// object a line) holds a payload containing want.
func cosignPrinted(out, want string) bool {
	for _, line := range strings.Split(out, "\n") {
		var env struct {
			Payload []byte `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &env) == nil && strings.Contains(string(env.Payload), want) {
			return true
		}
	}
	return false
}

// TestTestResultNeverPassesAFailedOrSimulatedRun (issue 30, items 3 and
// 4): a signed run whose exec step failed beside a test step that
// passed, and a passed run on a simulated GPU, each verify against
// docs/examples/test-result-policy.yaml with --predicate-type test-result
// and no --allow-simulated: both are refused (exit 12), the failed run's
// statement naming the exec step, the simulated one's saying WARNED. The
// same run, passed on real hardware, verifies.
func TestTestResultNeverPassesAFailedOrSimulatedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys, err := sign.GenerateKeyPair(filepath.Join(dir, "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadPrivateKey(keys.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	policyFile, err := filepath.Abs("../../docs/examples/test-result-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		opts     []runfixture.Option
		wantCode int
		wantOut  []string
	}{
		{name: "passed", wantCode: 0, wantOut: []string{"Verified OK"}},
		{name: "failed exec step", opts: []runfixture.Option{runfixture.WithFailedExec("memcheck")}, wantCode: exitPolicy,
			wantOut: []string{"test_result.passed", "test_result.no_failed_tests"}},
		{name: "simulated GPU", opts: []runfixture.Option{runfixture.WithSimulatedGPU()}, wantCode: exitPolicy,
			wantOut: []string{"test_result.passed", "test_result.ran_cases"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runDir := filepath.Join(dir, fmt.Sprintf("run-%d", i))
			opts := append([]runfixture.Option{runfixture.WithTestCases("vector_add/n=1024", "softmax/rows=8")}, tt.opts...)
			if _, err := runfixture.Write(t.Context(), filepath.Join(dir, fmt.Sprintf("root-%d", i)), runDir,
				[]runfixture.File{{Name: "build/a.fatbin", Size: 4096}}, s, opts...); err != nil {
				t.Fatal(err)
			}
			bundles := filepath.Join(runDir, "attestations.intoto.jsonl")
			fatbin := filepath.Join(runDir, "steps", "kernels", "outputs", "build", "a.fatbin")
			code, stdout, errOut := cli(t, "verify", "--bundle", bundles, "--key", keys.Public,
				"--predicate-type", attest.TestResultPredicateType, "--policy", policyFile, fatbin)
			if code != tt.wantCode {
				t.Fatalf("verify --predicate-type test-result --policy %s: exit %d, want %d\n%s%s", policyFile, code, tt.wantCode, stdout, errOut)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout, w) {
					t.Errorf("verify output does not name %q:\n%s", w, stdout)
				}
			}
			preds := testResultPredicates(t, bundles)
			if len(preds) != 1 {
				t.Fatalf("%d test-result statements, want 1 (the test step's)", len(preds))
			}
			p := preds[0]
			switch tt.name {
			case "passed":
				if p.Result != attest.TestResultPassed {
					t.Errorf("result %s, want PASSED", p.Result)
				}
			case "failed exec step":
				if p.Result != attest.TestResultFailed || !slices.Contains(p.FailedTests, "memcheck") {
					t.Errorf("result %s, failedTests %v: want FAILED naming memcheck", p.Result, p.FailedTests)
				}
			case "simulated GPU":
				sim := slices.ContainsFunc(p.Configuration, func(c attest.ResourceDescriptor) bool {
					return c.Name == "hardware.json" && c.Annotations[attest.SimulatedAnnotation] == "true"
				})
				if p.Result != attest.TestResultWarned || len(p.PassedTests) != 0 || len(p.WarnedTests) != 2 || !sim {
					t.Errorf("result %s, passed %v, warned %v, hardware simulated %v: want WARNED, the cases warned, the hardware annotated",
						p.Result, p.PassedTests, p.WarnedTests, sim)
				}
			}
		})
	}
}

// testResultPredicates decodes the test-result predicates of a JSONL
// file of bundles (their signatures are verify's business).
func testResultPredicates(t *testing.T, file string) []attest.TestResultPredicate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []attest.TestResultPredicate
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		st, err := sign.UnverifiedStatement([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if st.PredicateType != attest.TestResultPredicateType {
			continue
		}
		var p attest.TestResultPredicate
		if err := json.Unmarshal(st.Predicate, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
