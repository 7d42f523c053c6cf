package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// TestVerifyNodeGPUEvidence (issue 33 item 5): each job's row says what
// its node's GPUs signed over the nonce the verifier derives from the
// dispatch it verified, the job and the GPU's UUID; evidence answering
// another job's or another dispatch's nonce fails that job, naming the
// GPU; with RequireGPUEvidence an unattested GPU, or a node without
// evidence, fails its job; simulated evidence passes only under the test
// root, and says SIMULATED.
func TestVerifyNodeGPUEvidence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := newFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	ca, err := gpuevidencetest.NewCA(now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ca.NewGPU(gpuevidencetest.GPUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "GPU-11111111-2222-3333-4444-555555555555"
	signed := func(n gpuevidence.Nonce) *attest.GPUEvidence {
		it, err := g.Evidence(n)
		if err != nil {
			t.Fatal(err)
		}
		return &attest.GPUEvidence{NonceFrom: attest.NonceFromFleet, Artifacts: []string{}, CollectedAt: now,
			GPUs: []gpuevidence.Collected{{UUID: uuid, Name: "NVIDIA H100 80GB HBM3", Source: gpuevidence.SourceSimulated, Evidence: &it}}}
	}
	unattested := &attest.GPUEvidence{NonceFrom: attest.NonceFromFleet, Artifacts: []string{}, CollectedAt: now,
		GPUs: []gpuevidence.Collected{{UUID: "GPU-a100", Name: "NVIDIA A100-SXM4-40GB", Reason: "NVIDIA A100-SXM4-40GB: no device attestation (Ampere)"}}}
	nodes := func(h100 *attest.GPUEvidence) []verify.Entry {
		a, h := f.node("a100-0"), f.node("h100-0")
		a.GPUEvidence, h.GPUEvidence = unattested, h100
		return []verify.Entry{f.bundle(t, f.jobKeys["a100-0"], a, "a.jsonl"), f.bundle(t, f.jobKeys["h100-0"], h, "h.jsonl")}
	}
	root := []gpuevidence.Option{gpuevidence.WithDeviceRoot(ca.DeviceRoot.Cert, "test root")}
	owner := []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}
	tests := []struct {
		name     string
		h100     *attest.GPUEvidence
		opts     dispatch.Options
		verified bool
		want     string // in h100-0's row (or the problems when not verified)
	}{
		{"device-signed under the test root", signed(gpuevidence.FleetNonce(f.digest, "h100-0", uuid)), dispatch.Options{GPUEvidence: root}, true,
			"GPU evidence: 1/1 device-signed (SIMULATED"},
		{"another job's nonce", signed(gpuevidence.FleetNonce(f.digest, "a100-0", uuid)), dispatch.Options{GPUEvidence: root}, false,
			"job h100-0 (class h100): failed: on node node-h100-0: GPU evidence: 0/1 device-signed, 1 failed: " + uuid},
		{"another dispatch's nonce", signed(gpuevidence.FleetNonce(other.digest, "h100-0", uuid)), dispatch.Options{GPUEvidence: root}, false,
			"job h100-0 (class h100): failed: on node node-h100-0: GPU evidence: 0/1 device-signed, 1 failed: " + uuid},
		{"not under NVIDIA's root", signed(gpuevidence.FleetNonce(f.digest, "h100-0", uuid)), dispatch.Options{}, false,
			"job h100-0 (class h100): failed: on node node-h100-0: GPU evidence: 0/1 device-signed, 1 failed: " + uuid},
		{"evidence removed, required", nil, dispatch.Options{GPUEvidence: root, RequireGPUEvidence: true}, false,
			"job h100-0 (class h100): failed: on node node-h100-0: no GPU evidence, and it is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := dispatch.Verify(t.Context(), f.entry, owner, nodes(tc.h100), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verified != tc.verified {
				t.Errorf("verified %v, want %v\n%s", r.Verified, tc.verified, strings.Join(r.Problems, "\n"))
			}
			if tc.verified {
				if row := r.Jobs[1]; row.Job != "h100-0" || !strings.Contains(row.GPUEvidence, tc.want) {
					t.Errorf("h100-0 row %+v, want %q", row, tc.want)
				}
				if row := r.Jobs[0]; !strings.Contains(row.GPUEvidence, "GPU evidence: 0/1 device-signed, 1 unattested (NVIDIA A100-SXM4-40GB: no device attestation (Ampere))") {
					t.Errorf("a100-0 row %+v: want it unattested with the reason", row)
				}
				return
			}
			if !strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
				t.Errorf("problems do not contain %q:\n%s", tc.want, strings.Join(r.Problems, "\n"))
			}
		})
	}
	// With RequireGPUEvidence the unattested A100 fails its job.
	r, err := dispatch.Verify(t.Context(), f.entry, owner, nodes(signed(gpuevidence.FleetNonce(f.digest, "h100-0", uuid))), dispatch.Options{GPUEvidence: root, RequireGPUEvidence: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || !strings.Contains(strings.Join(r.Problems, "\n"), "job a100-0 (class a100): failed: on node node-a100-0: GPU evidence: 0/1 device-signed, 1 unattested") || r.Jobs[1].Verdict != dispatch.VerdictPassed {
		t.Errorf("required: verified %v, jobs %+v\n%s", r.Verified, r.Jobs, strings.Join(r.Problems, "\n"))
	}
}
