package main

import (
	"encoding/json"
	"os"
	"path/filepath"
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
