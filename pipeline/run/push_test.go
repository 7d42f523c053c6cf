package run_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// signedRun writes a signed fixture run and returns its directory and the
// verifier of its key.
func signedRun(t *testing.T) (string, *verify.Verifier) {
	t.Helper()
	files := []runfixture.File{{Name: "build/a.fatbin", Size: 5000}, {Name: "build/b.fatbin", Data: []byte("b")}}
	dir, _, v := signFixture(t, files, "test key")
	return dir, v
}

// signFixture writes a fixture run releasing files, signed with a fresh
// key, and returns its directory, the public key (PEM) and a verifier of
// that key. The fixture run used no GPU, so the verifier applies the CPU
// tier, by name.
func signFixture(t *testing.T, files []runfixture.File, keyName string) (dir string, pubPEM []byte, v *verify.Verifier) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := sign.NewKeypair(priv)
	s, _ := sign.NewKeySigner(kp)
	pem, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "run")
	if _, err := runfixture.Write(t.Context(), filepath.Join(t.TempDir(), "root"), dir, files, s); err != nil {
		t.Fatal(err)
	}
	cpuTier, err := policy.Builtin(policy.BuiltinCPUTier, false)
	if err != nil {
		t.Fatal(err)
	}
	if v, err = verify.New(verify.WithKey(priv.Public(), keyName), verify.WithPolicy(cpuTier)); err != nil {
		t.Fatal(err)
	}
	return dir, []byte(pem), v
}

func TestPushSignedRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir, v := signedRun(t)
	host := registrytest.StartInProcess(t, nil)
	res, err := run.Push(ctx, dir, host+"/k:v1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 2 || res.Bundles != 2 || res.Written != 2 {
		t.Errorf("push %+v", res)
	}
	vr, err := oci.Verify(ctx, v, host+"/k:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !vr.Report.Verified || vr.Digest != res.Digest {
		t.Fatalf("verify %+v: %+v", vr, vr.Report.Checks)
	}
}

func TestPushRefuses(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	tests := []struct {
		name    string
		edit    func(t *testing.T, dir string)
		opts    []run.PushOption
		wantErr string
	}{
		{"unsigned", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, run.AttestationsFile)) }, nil, "no attestations"},
		{"changed copy", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "steps/kernels/outputs/build/b.fatbin"), []byte("cc"), 0o644)
		}, nil, "but the attestations sign"},
		{"failed", func(t *testing.T, dir string) { editState(t, dir, `"state": "passed"`, `"state": "failed"`) }, nil, "--allow-failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, _ := signedRun(t)
			tt.edit(t, dir)
			_, err := run.Push(t.Context(), dir, host+"/refused:v1", tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	// A copy changed in place (same size) is caught as it is uploaded,
	// before the registry keeps it.
	dir, _ := signedRun(t)
	os.WriteFile(filepath.Join(dir, "steps/kernels/outputs/build/b.fatbin"), []byte("c"), 0o644)
	if _, err := run.Push(t.Context(), dir, registrytest.StartInProcess(t, nil)+"/changed:v1"); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("push of a changed copy: err = %v", err)
	}
	// With AllowFailed a failed run goes up (its attestations say how it went).
	dir, _ = signedRun(t)
	editState(t, dir, `"state": "passed"`, `"state": "failed"`)
	if _, err := run.Push(t.Context(), dir, host+"/failed:v1", run.AllowFailed()); err != nil {
		t.Errorf("push --allow-failed: %v", err)
	}
}

// editState replaces the first old in run.json (the run's own state) with new.
func editState(t *testing.T, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, "run.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, old)
	if i < 0 {
		t.Fatalf("run.json has no %s", old)
	}
	if err := os.WriteFile(p, []byte(s[:i]+new+s[i+len(old):]), 0o644); err != nil {
		t.Fatal(err)
	}
}
