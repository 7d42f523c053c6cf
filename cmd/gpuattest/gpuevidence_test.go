package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
)

const nvidiaEvidence = "../../attest/gpuevidence/testdata/nvidia/serialized_test_evidence/"

// TestGPUEvidenceVerify runs gpu-evidence verify on NVIDIA's real
// evidence and on simulated evidence, and checks exit codes (verify's)
// and what it prints.
func TestGPUEvidenceVerify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A simulated GPU, its RIMs in a collateral directory, and a
	// tampered copy of its evidence.
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	ca, err := gpuevidencetest.NewCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ca.NewGPU(gpuevidencetest.GPUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nonce := gpuevidence.RunNonce("run-1", []string{"sha256:aa"})
	it, err := g.Evidence(nonce)
	if err != nil {
		t.Fatal(err)
	}
	simFile := filepath.Join(dir, "sim.json")
	writeEvidence(t, simFile, []gpuevidence.Item{it})
	gpuRoot, rimRoot, err := ca.WriteRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	rims, err := ca.RIMs(g, ca.RIMSigner)
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "rims")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	for id, b := range rims {
		if err := os.WriteFile(filepath.Join(store, id+gpuevidence.RIMExt), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g.Measurements[20] = make([]byte, 48)
	bad, err := g.Evidence(nonce)
	if err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(dir, "changed.json")
	writeEvidence(t, badFile, []gpuevidence.Item{bad})
	junk := filepath.Join(dir, "junk.json")
	if err := os.WriteFile(junk, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}

	const multiNonce = "e97b23a1718095a0e9e35edca810768c70a6a5a389b705e753b197912bc11576"
	at := "2025-03-02T00:00:00Z"
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"NVIDIA's four GPUs", []string{nvidiaEvidence + "multi_gpu_hopper.json", "--nonce", multiNonce}, exitOK,
			[]string{"GPU 3  HOPPER  GH100 A01 GSP BROM  driver 590.12", "device-signed, measurements not checked: no RIMs given", "GPU evidence: 4/4 device-signed", "Verified OK"}},
		{"another nonce", []string{nvidiaEvidence + "hopper_evidence.json", "--nonce", nonce.String()}, exitSig,
			[]string{"nonce: the report signs e97b23a1", "Verification FAILED: device signature"}},
		{"simulated under NVIDIA's root", []string{simFile, "--nonce", nonce.String()}, exitSig,
			[]string{`does not verify to "NVIDIA Device Identity CA"`}},
		{"simulated under its root, with its RIMs", []string{simFile, "--nonce", nonce.String(), "--gpu-root", gpuRoot, "--rim-root", rimRoot, "--rim-store", store, "--at", at}, exitOK,
			[]string{"device-signed, measurements matched", "SIMULATED: the chain ends at --gpu-root", "1/1 device-signed (1 measurements matched, 0 not checked)"}},
		{"a changed measurement", []string{badFile, "--nonce", nonce.String(), "--gpu-root", gpuRoot, "--rim-root", rimRoot, "--rim-store", store, "--at", at}, exitPolicy,
			[]string{"measurement 20 (driver RIM", "Verification FAILED: reference measurements (exit 12)"}},
		{"RIMs judged after their signer expired", []string{simFile, "--nonce", nonce.String(), "--gpu-root", gpuRoot, "--rim-root", rimRoot, "--rim-store", store, "--at", "2027-01-01"}, exitPolicy,
			[]string{"expired"}},
		{"no nonce", []string{simFile}, exitUsage, []string{"--nonce is required"}},
		{"a short nonce", []string{simFile, "--nonce", "abcd"}, exitUsage, []string{"expected 64 hex digits"}},
		{"a bad time", []string{simFile, "--nonce", nonce.String(), "--at", "yesterday"}, exitUsage, []string{"--at \"yesterday\""}},
		{"a root that is not a CA", []string{simFile, "--nonce", nonce.String(), "--gpu-root", "../../attest/gpuevidence/testdata/nvidia/unit-tests/incorrect_rim_root.crt"}, exitUsage, []string{"not a CA"}},
		{"an unreadable file", []string{junk, "--nonce", nonce.String()}, exitFailed, []string{"junk.json"}},
		{"a missing file", []string{filepath.Join(dir, "none.json"), "--nonce", nonce.String()}, exitFailed, []string{"none.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			code := execute(append([]string{"gpu-evidence", "verify"}, tc.args...), strings.NewReader(""), &out, &out)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output does not say %q:\n%s", w, out.String())
				}
			}
		})
	}

	// -o json: the report, machine-readable.
	var out bytes.Buffer
	if code := execute([]string{"gpu-evidence", "verify", nvidiaEvidence + "multi_gpu_hopper.json", "--nonce", multiNonce, "-o", "json"}, strings.NewReader(""), &out, &out); code != exitOK {
		t.Fatalf("-o json: exit %d\n%s", code, out.String())
	}
	var js struct {
		Verified bool
		Summary  string
		GPUs     []gpuevidence.GPU
	}
	if err := json.Unmarshal(out.Bytes(), &js); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out.String())
	}
	if !js.Verified || len(js.GPUs) != 4 || !js.GPUs[0].DeviceSigned || !js.GPUs[0].NVIDIARoot || js.GPUs[0].Status != gpuevidence.StatusNotChecked {
		t.Errorf("-o json: %+v", js)
	}
}

func writeEvidence(t *testing.T, path string, items []gpuevidence.Item) {
	t.Helper()
	b, err := gpuevidence.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
