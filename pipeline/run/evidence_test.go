package run_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// TestGPUEvidenceUnattested (issue 33, acceptance 4): a run without a GPU
// (CI's CPU tier) records why no GPU was asked and passes as before;
// with requireGPUEvidence it fails, saying why. A simulated A100 is
// unattested, named with its reason.
func TestGPUEvidenceUnattested(t *testing.T) {
	t.Parallel()
	a100, err := gpu.Simulate("a100")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		require    string
		src        gpu.Source
		state      runtypes.State
		wantRecord string
		wantReason string
	}{
		{"no GPU", "false", noGPU(t), runtypes.Passed, `"reason":"no GPU: `, ""},
		{"no GPU, required", "true", noGPU(t), runtypes.Failed, `"reason":"no GPU: `, "GPU evidence: requireGPUEvidence: no GPU: "},
		{"A100", "false", a100, runtypes.Passed, "no device attestation (Ampere)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pipeline.Load(write(t, "requireGPUEvidence: "+tc.require+"\nsteps:\n  - {id: a, run: echo hi}\n"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(), run.WithGPUSource(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if res.Record.State != tc.state || !strings.Contains(res.Record.Reason, tc.wantReason) {
				t.Errorf("run %s %q, want %s with %q", res.Record.State, res.Record.Reason, tc.state, tc.wantReason)
			}
			if !strings.Contains(string(res.Record.GPUEvidence), tc.wantRecord) {
				t.Errorf("gpu_evidence %s, want %s", res.Record.GPUEvidence, tc.wantRecord)
			}
		})
	}
}

// TestGPUEvidenceRIMStore: --rim-store's RIMs and OCSP answers are copied
// beside the evidence, each named with its digest in the record.
func TestGPUEvidenceRIMStore(t *testing.T) {
	t.Parallel()
	ca, err := gpuevidencetest.NewCA(time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	src, err := gpu.Simulate("h100")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.EnableEvidence(ca); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	if err := os.WriteFile(filepath.Join(store, "NV_GPU_DRIVER_GH100_1.2.3"+gpuevidence.RIMExt), []byte("<rim/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two GPU steps start at once: the GPUs are asked once, before both.
	p, err := pipeline.Load(write(t, "requireGPUEvidence: true\nsteps:\n  - {id: a, run: echo hi, gpu: true}\n  - {id: b, run: echo hi, gpu: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(), run.WithGPUSource(src),
		run.WithRIMStore(store), run.WithBaseEnv([]string{"PATH=" + os.Getenv("PATH")}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() {
		t.Fatalf("run %s: %q; step a: %q", res.Record.State, res.Record.Reason, res.Record.Step("a").Reason)
	}
	var rec attest.GPUEvidence
	if err := json.Unmarshal(res.Record.GPUEvidence, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.GPUs) != 1 || rec.GPUs[0].Source != gpuevidence.SourceSimulated || rec.File == nil {
		t.Errorf("record %+v: want one simulated GPU with its evidence file", rec)
	}
	if len(rec.Collateral) != 1 || rec.Collateral[0].Path != "gpu-evidence/NV_GPU_DRIVER_GH100_1.2.3.xml" {
		t.Fatalf("collateral %+v", rec.Collateral)
	}
	if b, err := os.ReadFile(filepath.Join(res.Dir, rec.Collateral[0].Path)); err != nil || string(b) != "<rim/>" {
		t.Errorf("collateral copy: %q %v", b, err)
	}
	items, err := gpuevidence.ParseFile("gpu-evidence.json", mustRead(t, filepath.Join(res.Dir, attest.GPUEvidenceFile)))
	if err != nil || len(items) != 1 || items[0] != *rec.GPUs[0].Evidence {
		t.Errorf("gpu-evidence.json: %v, %d items", err, len(items))
	}
	// What is signed is read back with its digests checked: a file
	// changed after the run is refused.
	if run, err := collect.FromRunDir(res.Dir, p); err != nil || run.GPUEvidence == nil || len(run.GPUEvidence.GPUs) != 1 {
		t.Fatalf("reading the run: %v", err)
	}
	if err := os.WriteFile(filepath.Join(res.Dir, rec.Collateral[0].Path), []byte("<other/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := collect.FromRunDir(res.Dir, p); err == nil || !strings.Contains(err.Error(), "run.json records") {
		t.Errorf("a changed collateral file: %v, want its digest refused", err)
	}
}

// TestGPUEvidenceFleetNonce: a fleet node's GPUs each sign FleetNonce of
// the dispatch, the job and their UUID, which the fleet's verifier
// derives on its own; another job's derivation fails, naming the GPU.
func TestGPUEvidenceFleetNonce(t *testing.T) {
	t.Parallel()
	ca, err := gpuevidencetest.NewCA(time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	src, err := gpu.Simulate("h100:2")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.EnableEvidence(ca); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(write(t, "steps:\n  - {id: a, run: echo hi, gpu: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	const dispatch = "sha256:0123456789012345678901234567890123456789012345678901234567890123"
	res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(), run.WithGPUSource(src),
		run.WithFleetNonce(dispatch, "h100-3"), run.WithBaseEnv([]string{"PATH=" + os.Getenv("PATH")}))
	if err != nil || !res.Passed() {
		t.Fatalf("run: %v %+v", err, res.Record)
	}
	var rec attest.GPUEvidence
	if err := json.Unmarshal(res.Record.GPUEvidence, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.NonceFrom != attest.NonceFromFleet || len(rec.GPUs) != 2 {
		t.Fatalf("record %+v: want two GPUs over the fleet nonce", rec)
	}
	root := gpuevidence.WithDeviceRoot(ca.DeviceRoot.Cert, "test root")
	for _, tc := range []struct {
		job    string
		passed bool
	}{{"h100-3", true}, {"h100-4", false}} {
		got := verify.VerifyGPUEvidence(t.Context(), &rec, func(c gpuevidence.Collected) gpuevidence.Nonce {
			return gpuevidence.FleetNonce(dispatch, tc.job, c.UUID)
		}, true, root)
		if got.Passed != tc.passed || (!tc.passed && !strings.Contains(strings.Join(got.Problems, "\n"), rec.GPUs[1].UUID)) {
			t.Errorf("job %s: passed %v (%s), want %v, the GPUs named: %v", tc.job, got.Passed, got.Summary, tc.passed, got.Problems)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
