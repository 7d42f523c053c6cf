package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
)

// evidenceFleet is one class of simulated H100s whose pipeline requires
// GPU evidence.
const evidenceFleet = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: slurm
partition: gpu
sharedDir: %SHARED%
classes:
  - name: h100
    gres: gpu:h100:1
    constraint: sm_90
    targets: [sm_90]
    timeLimit: 5m
`

// TestFleetGPUEvidence (issue 33, acceptance 3): a simulated fleet run
// with requireGPUEvidence: the node's simulated H100 signs its evidence
// over the fleet nonce (dispatch, job, UUID) under a test PKI; the
// coordinator, judging under NVIDIA's root, fails the job; verify of the
// bundles passes with --gpu-root at the test root, printing the job's
// "GPU evidence: 1/1 device-signed (SIMULATED", and fails without it,
// naming the GPU. (Another job's or dispatch's nonce, and evidence
// removed: TestVerifyNodeGPUEvidence.)
func TestFleetGPUEvidence(t *testing.T) {
	dir := fleetSetup(t)
	ca, err := gpuevidencetest.NewCA(time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caDir := filepath.Join(dir, "ca")
	if err := os.Mkdir(caDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(caDir); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPUATTEST_FAKE_GPU_CA", caDir)
	shared := filepath.Join(dir, "shared")
	p := strings.Replace(strings.ReplaceAll(fleetPipeline, "%SHARED%", shared), "targets: [sm_80, sm_90]", "targets: [sm_90]\nrequireGPUEvidence: true", 1)
	write(t, filepath.Join(dir, "proj", "p.yaml"), p)
	write(t, filepath.Join(dir, "fleet.yaml"), strings.ReplaceAll(evidenceFleet, "%SHARED%", shared))
	code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "--timeout", "2m")
	// The coordinator judges the nodes under NVIDIA's pinned root, which
	// the simulated GPU's chain does not reach: the job fails there.
	if code != exitFailed || !strings.Contains(out, `does not verify to "NVIDIA Device Identity CA"`) {
		t.Fatalf("run --fleet: exit %d, want %d and the simulated chain refused under NVIDIA's root\n%s", code, exitFailed, out)
	}
	bundles := []string{"--bundle", filepath.Join("run", "dispatch.intoto.jsonl"), "--bundle", filepath.Join("run", "nodes", "h100-0.intoto.jsonl")}
	args := append([]string{"verify", "--key", "rel.pub", "--allow-simulated", "--require-gpu-evidence"}, bundles...)
	code, out = fleetCLI(t, dir, append(args, "--gpu-root", filepath.Join(caDir, "gpu-root.pem"))...)
	if code != 0 || !strings.Contains(out, "GPU evidence: 1/1 device-signed (SIMULATED") {
		t.Errorf("verify --gpu-root: exit %d, want 0 with 1/1 device-signed\n%s", code, out)
	}
	// Offline means offline (acceptance 5): the same verification in a
	// network namespace with only its own loopback.
	if unshare := offlinePrefix(t); unshare != nil {
		cmd := exec.Command(unshare[0], append(unshare[1:], append([]string{selfAsGpuattest(t)}, append(args, "--gpu-root", filepath.Join(caDir, "gpu-root.pem"))...)...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GPUATTEST_PASSWORD="}
		if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "GPU evidence: 1/1 device-signed (SIMULATED") {
			t.Errorf("verify inside %s: %v\n%s", strings.Join(unshare, " "), err, b)
		}
	}
	code, out = fleetCLI(t, dir, args...)
	if code == 0 || !strings.Contains(out, "job h100-0 (class h100): failed") || !strings.Contains(out, "GPU-") {
		t.Errorf("verify without --gpu-root: exit %d, want the job failed naming its GPU\n%s", code, out)
	}
	// run --fleet with the test root: the coordinator's check passes.
	code, out = fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run2", "--simulate-gpus", "--timeout", "2m", "--gpu-root", filepath.Join(caDir, "gpu-root.pem"))
	if code != 0 || !strings.Contains(out, "GPU evidence: 1/1 device-signed (SIMULATED") {
		t.Errorf("run --fleet --gpu-root: exit %d, want 0 with 1/1 device-signed\n%s", code, out)
	}
	// fleet verify of the collected run directory takes the same roots.
	fv := []string{"fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated", "--require-gpu-evidence"}
	code, out = fleetCLI(t, dir, append(fv, "--gpu-root", filepath.Join(caDir, "gpu-root.pem"))...)
	if code != 0 || !strings.Contains(out, "GPU evidence: 1/1 device-signed (SIMULATED") {
		t.Errorf("fleet verify --gpu-root: exit %d, want 0 with 1/1 device-signed\n%s", code, out)
	}
	if code, out = fleetCLI(t, dir, fv...); code == 0 || !strings.Contains(out, "job h100-0 (class h100): failed") {
		t.Errorf("fleet verify without --gpu-root: exit %d, want the job failed\n%s", code, out)
	}
}
