package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// TestVerifyExit checks that the CLI, not the library, maps each kind of
// verification failure to its exit code in docs/exit-codes.md.
func TestVerifyExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		failure verify.Failure
		want    int
	}{
		{verify.FailureNone, 0},
		{verify.FailureError, 1},
		{verify.FailureSignature, 10},
		{verify.FailureSubject, 11},
		{verify.FailurePolicy, 12},
	}
	for _, tt := range tests {
		if got := verifyExit(tt.failure); got != tt.want {
			t.Errorf("verifyExit(%s) = %d, want %d", tt.failure, got, tt.want)
		}
	}
}

// TestVerifyOutputJSON checks that -o json carries the failure kind and
// the exit code next to each other.
func TestVerifyOutputJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(verifyOutput{Report: &verify.Report{Failure: verify.FailureSubject}, ExitCode: 11})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Failure  string `json:"failure"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Failure != "subject" || got.ExitCode != 11 {
		t.Errorf("json = %s", b)
	}
}

// signedFixture writes a public key and a bundle of payload signed with
// its private key into dir.
func signedFixture(t *testing.T, dir string, payload []byte) (pubPath string, bundle []byte) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPath = filepath.Join(dir, "key.pub")
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	kp, err := sign.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err = s.SignPayload(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	return pubPath, bundle
}

// runCLI runs gpuattest with args and returns the exit code and output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestVerifyTextEscapes: strings from a bundle and its statement reach a
// terminal escaped; an escape sequence cannot erase the FAIL line.
func TestVerifyTextEscapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	art := filepath.Join(dir, "k.bin")
	if err := os.WriteFile(art, []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("kernel"))
	payload := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"k\u001b[2K\u001b[1A\rPASS\u202e","digest":{"sha256":"` + hex.EncodeToString(sum[:]) + `"}}],"predicateType":"https://example.com/p/v1","predicate":{}}`
	pub, bundle := signedFixture(t, dir, []byte(payload))
	good := filepath.Join(dir, "good.json")
	forged := filepath.Join(dir, "forged.json")
	if err := os.WriteFile(good, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	mt := []byte(`"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json`)
	if err := os.WriteFile(forged, bytes.Replace(bundle, mt, append(mt, `\u001b[2K\u001b[1A\rPASS signature`...), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		bundle   string
		wantCode int
		want     string
	}{
		{good, 0, `k\x1b[2K\x1b[1A\rPASS\u202e in `},
		{forged, 10, `v0.3+json\x1b[2K\x1b[1A\rPASS signature`},
	} {
		code, stdout, stderr := runCLI(t, "verify", "--bundle", tt.bundle, "--key", pub, "--predicate-type", "https://example.com/p/v1", art)
		if code != tt.wantCode {
			t.Errorf("%s: exit %d, want %d\n%s%s", tt.bundle, code, tt.wantCode, stdout, stderr)
		}
		if strings.ContainsAny(stdout+stderr, "\x1b\r\u202e") {
			t.Errorf("%s: raw control characters in the output:\n%q", tt.bundle, stdout+stderr)
		}
		if !strings.Contains(stdout, tt.want) {
			t.Errorf("%s: output lacks %s:\n%s", tt.bundle, tt.want, stdout)
		}
	}
}

// TestCompareTextEscapes: case names from results files are escaped.
func TestCompareTextEscapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	samples := make([]string, 12)
	for i := range samples {
		samples[i] = fmt.Sprintf("%d.0", 1000+i)
	}
	doc := `{"schema":"https://gpuattest.dev/results/v1","tool":"t\u001b]0;x\u0007","backend":"cpu","cases":[{"name":"copy\u001b[1A\u001b[2KPASS","kernel":"copy","status":"passed","samples_ns":[` + strings.Join(samples, ",") + `]}]}`
	p := filepath.Join(dir, "r.json")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "compare", "--baseline", p, "--candidate", p)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if strings.ContainsAny(stdout+stderr, "\x1b\x07") {
		t.Errorf("raw control characters in the output:\n%q", stdout+stderr)
	}
	if !strings.Contains(stdout, `copy\x1b[1A\x1b[2KPASS`) {
		t.Errorf("output lacks the escaped case name:\n%s", stdout)
	}
}
