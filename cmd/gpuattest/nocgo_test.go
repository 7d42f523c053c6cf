package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// buildNoCgo builds gpuattest with CGO_ENABLED=0 (no NVML: pipeline/gpu's
// nvml_other.go) into a temporary directory; the test is skipped with
// -short or without a go command.
func buildNoCgo(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds gpuattest without cgo; skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build gpuattest without cgo")
	}
	bin := filepath.Join(t.TempDir(), "gpuattest")
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	return bin
}

// execBin runs bin with args in dir and returns its exit code and output.
func execBin(t *testing.T, bin, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// TestNoCgoBuild (issue 36, acceptance 2): gpuattest built without cgo
// verifies a release signed by this (cgo) build exactly as this build
// does, refuses a tampered artifact, and refuses a pipeline with a
// gpu: true step (and device) with exit 2, naming the platform.
func TestNoCgoBuild(t *testing.T) {
	bin := buildNoCgo(t)
	t.Setenv("GPUATTEST_PASSWORD", "")
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "key", "generate", "--output-key-prefix", filepath.Join(dir, "rel"), "--no-password"); code != 0 {
		t.Fatalf("key generate exited %d: %s", code, stderr)
	}
	art := filepath.Join(dir, "k.bin")
	if err := os.WriteFile(art, []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("kernel"))
	st := filepath.Join(dir, "statement.json")
	payload := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"k.bin","digest":{"sha256":"` + hex.EncodeToString(sum[:]) + `"}}],"predicateType":"https://example.com/p/v1","predicate":{}}`
	if err := os.WriteFile(st, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "b.jsonl")
	if code, _, stderr := runCLI(t, "sign", st, "--key", filepath.Join(dir, "rel.key"), "-o", bundle); code != 0 {
		t.Fatalf("sign exited %d: %s", code, stderr)
	}
	verify := []string{"verify", "--bundle", bundle, "--key", filepath.Join(dir, "rel.pub"), "--predicate-type", "https://example.com/p/v1", art}
	wantCode, wantOut, _ := runCLI(t, verify...)
	code, out, stderr := execBin(t, bin, dir, verify...)
	if code != 0 || !strings.Contains(out, "Verified OK") {
		t.Fatalf("verify without cgo: exit %d\n%s%s", code, out, stderr)
	}
	if code != wantCode || out != wantOut {
		t.Errorf("verify without cgo differs from this build: exit %d, want %d\n%s\nwant\n%s", code, wantCode, out, wantOut)
	}
	if err := os.WriteFile(art, []byte("kernel, changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := execBin(t, bin, dir, verify...); code == 0 {
		t.Errorf("verify without cgo passed a changed artifact:\n%s%s", out, stderr)
	}

	p := filepath.Join(dir, "proj", "p.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	pipe := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: nocgo\ntargets: [sm_90]\nsteps:\n  - id: check\n    gpu: true\n    run: \"true\"\n"
	if err := os.WriteFile(p, []byte(pipe), 0o644); err != nil {
		t.Fatal(err)
	}
	platform := "built for " + runtime.GOOS + "/" + runtime.GOARCH + " without cgo"
	code, out, stderr = execBin(t, bin, dir, "run", p, "--out", filepath.Join(dir, "run"))
	if code != exitUsage || !strings.Contains(stderr, "step check has gpu: true") || !strings.Contains(stderr, platform) {
		t.Errorf("run of a gpu: true step without cgo: exit %d, want %d naming %q\n%s%s", code, exitUsage, platform, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "run")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused run left a run directory: %v", err)
	}
	code, out, stderr = execBin(t, bin, dir, "device")
	if code != exitUsage || !strings.Contains(stderr, platform) {
		t.Errorf("device without cgo: exit %d, want %d naming %q\n%s%s", code, exitUsage, platform, out, stderr)
	}
}
