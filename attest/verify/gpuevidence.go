package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/policy"
)

// CheckGPUEvidence is the check of the GPUs' signed evidence a
// validation statement carries (gpu_evidence).
const CheckGPUEvidence = "gpu evidence"

// WithGPUEvidence verifies the GPUs' evidence in validation statements
// with opts (gpuevidence.WithDeviceRoot for a simulated GPU's test root,
// gpuevidence.WithCollateral for the RIMs and OCSP answers kept beside
// it); without it, under NVIDIA's pinned roots and with no collateral
// (measurements "not checked"). The time is always the one the
// statement recorded (collected_at). Evidence a statement carries is
// verified either way; this option adds the criterion to the report.
func WithGPUEvidence(opts ...gpuevidence.Option) Option {
	return func(o *options) error {
		o.gpuEvidence = append(o.gpuEvidence, opts...)
		o.gpuEvidenceSet = true
		return nil
	}
}

// WithGPUEvidenceRequired fails a validation statement in which a GPU is
// not device-signed (unattested, or no evidence recorded at all):
// verify --require-gpu-evidence.
func WithGPUEvidenceRequired() Option {
	return func(o *options) error {
		o.requireGPUEvidence = true
		o.gpuEvidenceSet = true
		return nil
	}
}

// GPUEvidenceResult is what the verifier made of one statement's GPU
// evidence.
type GPUEvidenceResult struct {
	// Summary is the line verify prints ("GPU evidence: 8/8
	// device-signed", "GPU evidence: 0/1 device-signed, 1 unattested
	// (NVIDIA A100-SXM4-80GB: no device attestation (Ampere))").
	Summary string `json:"summary"`
	// Simulated is true when a GPU verified under a replaced root (a
	// simulated or test GPU).
	Simulated bool `json:"simulated,omitempty"`
	// Passed is the check's outcome.
	Passed bool `json:"passed"`
	// Problems say what failed, each naming the GPU.
	Problems []string `json:"problems,omitempty"`
	// Report is the verdict on every GPU; nil when the statement carries
	// no evidence.
	Report *gpuevidence.Report `json:"report,omitempty"`
}

// gpuEvidenceFields are the predicate's fields the check reads.
type gpuEvidenceFields struct {
	RunID       string              `json:"run_id"`
	GPUEvidence *attest.GPUEvidence `json:"gpu_evidence"`
}

// checkGPUEvidence verifies the GPU evidence of b's validation statement
// (its nonce recomputed from the run's ID and the artifacts it names,
// judged as of when it was collected), records the check and returns
// what the policy sees as gpuEvidence.
func (v *Verifier) checkGPUEvidence(ctx context.Context, r *Report, b *BundleResult) []policy.GPUEvidence {
	var f gpuEvidenceFields
	if err := json.Unmarshal(b.statement.Predicate, &f); err != nil {
		return nil // the policy's decoding reports it
	}
	res := v.gpuEvidence(ctx, b, &f)
	b.GPUEvidence = res
	if res == nil {
		return nil
	}
	detail := res.Summary
	if len(res.Problems) > 0 {
		detail += ": " + strings.Join(res.Problems, "; ")
	}
	r.add(Check{Check: CheckGPUEvidence, Target: b.Source, Passed: res.Passed, Detail: detail})
	if !res.Passed {
		r.fail(gpuEvidenceFailure(res.Report))
	}
	if res.Report == nil {
		return nil
	}
	out := make([]policy.GPUEvidence, len(res.Report.GPUs))
	for i, g := range res.Report.GPUs {
		out[i] = policy.GPUEvidence{Label: g.Label, Arch: string(g.Arch), Status: string(g.Status), Reason: g.Reason,
			DeviceSigned: g.DeviceSigned, NVIDIARoot: g.NVIDIARoot, Model: g.Model, DriverVersion: g.DriverVersion, VBIOSVersion: g.VBIOSVersion}
	}
	return out
}

// gpuEvidenceFailure is a signature failure when a GPU's report did not
// verify as its device's, else a policy one (measurements, RIMs, a
// required GPU unattested).
func gpuEvidenceFailure(rep *gpuevidence.Report) Failure {
	if rep != nil {
		for _, g := range rep.GPUs {
			if g.Status == gpuevidence.StatusFailed && !g.DeviceSigned {
				return FailureSignature
			}
		}
	}
	return FailurePolicy
}

// gpuEvidence verifies f's evidence; nil when there is none and none is
// required.
func (v *Verifier) gpuEvidence(ctx context.Context, b *BundleResult, f *gpuEvidenceFields) *GPUEvidenceResult {
	g := f.GPUEvidence
	if g == nil {
		if !v.opts.requireGPUEvidence {
			return nil
		}
		return &GPUEvidenceResult{Summary: "GPU evidence: none recorded", Problems: []string{"the statement carries no GPU evidence, and --require-gpu-evidence requires it"}}
	}
	nonce := g.Nonce(f.RunID)
	res := VerifyGPUEvidence(ctx, g, func(gpuevidence.Collected) gpuevidence.Nonce { return nonce }, v.opts.requireGPUEvidence, v.opts.gpuEvidence...)
	res.Problems = append(nonceArtifacts(g, b.Subjects), res.Problems...)
	res.Passed = len(res.Problems) == 0
	return res
}

// VerifyGPUEvidence verifies the GPUs' evidence g offline, each GPU
// against the nonce nonceFor derives for it (the verifier's own
// derivation, never the evidence's), as of when it was collected, with
// opts (roots, collateral). An unattested GPU fails it when g says the
// pipeline required evidence, or when required is true; a GPU whose
// evidence does not verify always does. Every problem names the GPU.
func VerifyGPUEvidence(ctx context.Context, g *attest.GPUEvidence, nonceFor func(gpuevidence.Collected) gpuevidence.Nonce, required bool, opts ...gpuevidence.Option) *GPUEvidenceResult {
	required = required || g.Required
	res := &GPUEvidenceResult{}
	for _, err := range g.Validate() {
		res.Problems = append(res.Problems, err.Error())
	}
	if len(res.Problems) > 0 {
		// A malformed record (too many GPUs, no time) is not verified.
		res.Summary = "GPU evidence: malformed, not verified"
		return res
	}
	if len(g.GPUs) == 0 {
		res.Summary = "GPU evidence: " + g.Reason
		if required {
			res.Problems = append(res.Problems, "no GPU signed evidence, and it is required")
		}
		res.Passed = len(res.Problems) == 0
		return res
	}
	ver, err := gpuevidence.New(append([]gpuevidence.Option{gpuevidence.WithTime(g.CollectedAt)}, opts...)...)
	if err != nil {
		res.Summary = "GPU evidence: not verified"
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	rep := ver.VerifyCollected(ctx, g.GPUs, nonceFor)
	res.Report = rep
	res.Summary, res.Simulated = gpuEvidenceSummary(rep)
	for _, gpu := range rep.GPUs {
		switch {
		case gpu.Status == gpuevidence.StatusFailed:
			res.Problems = append(res.Problems, gpu.Label+": "+strings.Join(gpu.Problems, "; "))
		case gpu.Status == gpuevidence.StatusUnattested && required:
			res.Problems = append(res.Problems, gpu.Label+": unattested ("+gpu.Reason+"), and GPU evidence is required")
		}
	}
	res.Passed = len(res.Problems) == 0
	return res
}

// nonceArtifacts checks that every artifact the nonce covers is a
// subject of the statement: the evidence then proves the GPU answered
// after this run's artifacts existed.
func nonceArtifacts(g *attest.GPUEvidence, subjects []attest.Subject) []string {
	have := map[string]bool{}
	for _, s := range subjects {
		have["sha256:"+strings.ToLower(s.Digest["sha256"])] = true
	}
	var out []string
	for _, a := range g.Artifacts {
		if !have[a] {
			out = append(out, fmt.Sprintf("the GPUs' nonce covers %s, which is not a subject of the statement", a))
		}
	}
	return out
}

// gpuEvidenceSummary is the line verify prints for rep: how many GPUs
// are device-signed, and the unattested ones with their reasons.
func gpuEvidenceSummary(rep *gpuevidence.Report) (string, bool) {
	signed, failed, sim := 0, 0, false
	why := map[string]int{}
	for _, g := range rep.GPUs {
		switch {
		case g.Status.DeviceSigned():
			signed++
			sim = sim || !g.NVIDIARoot
		case g.Status == gpuevidence.StatusUnattested:
			why[g.Reason]++
		default:
			failed++
		}
	}
	s := fmt.Sprintf("GPU evidence: %d/%d device-signed", signed, len(rep.GPUs))
	if sim {
		s += " (SIMULATED: under a replaced root, not NVIDIA's)"
	}
	if failed > 0 {
		s += fmt.Sprintf(", %d failed", failed)
	}
	if len(why) > 0 {
		reasons := make([]string, 0, len(why))
		n := 0
		for r, k := range why {
			n += k
			if k > 1 {
				r = fmt.Sprintf("%d x %s", k, r)
			}
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		s += fmt.Sprintf(", %d unattested (%s)", n, strings.Join(reasons, "; "))
	}
	return s, sim
}
