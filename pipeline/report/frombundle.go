package report

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// ErrNotVerified is returned by FromVerification when the verification
// failed: a report of an unverified bundle is not made.
var ErrNotVerified = errors.New("the bundle did not verify: no report is made of what was not verified")

// FromVerification gathers the report of a verified attestation bundle:
// rep is what verify.Verifier.Verify returned for entries. Only bundles
// that rep records as verified are read, and of those only the statement
// their verified signature covers. A failed verification is ErrNotVerified.
func FromVerification(source string, rep *verify.Report, entries []verify.Entry) (*Report, error) {
	if rep == nil || !rep.Verified {
		return nil, ErrNotVerified
	}
	out := &Report{Source: source, FromBundle: true, Verification: &Verification{
		Verified: rep.Verified, Result: rep.VerificationResult, Policy: rep.Policy, PredicateType: rep.PredicateType,
		Criteria: rep.Criteria, Checks: rep.Checks, Bundles: rep.Bundles, Artifacts: rep.Artifacts, VerifiedAt: rep.VerifiedAt,
	}}
	data := map[string][]byte{}
	for _, e := range entries {
		data[e.Source] = e.Data
	}
	var pred *attest.ValidationPredicate
	for _, b := range rep.Bundles {
		if !b.Verified {
			continue
		}
		raw, ok := data[b.Source]
		if !ok {
			return nil, fmt.Errorf("bundle %s: verified, but not among the entries given", b.Source)
		}
		st, err := sign.UnverifiedStatement(raw)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", b.Source, err)
		}
		out.Subjects = append(out.Subjects, subjectsOf(st)...)
		if pred == nil && st.PredicateType == attest.ValidationPredicateType {
			if pred, err = decodePredicate(st.Predicate); err != nil {
				return nil, fmt.Errorf("bundle %s: %w", b.Source, err)
			}
		}
	}
	out.SubjectsNote = "from the verified bundles"
	if pred == nil {
		out.Verdict = Verdict{State: "verified", Passed: true}
		return out, nil
	}
	fillFromPredicate(out, pred)
	return out, nil
}

// fillFromPredicate fills out from a verified validation predicate.
func fillFromPredicate(out *Report, p *attest.ValidationPredicate) {
	out.PipelineDigest = p.PipelineDigest
	out.Version = p.GpuattestVersion
	out.StartedAt, out.FinishedAt = p.StartedAt, p.FinishedAt
	out.Verdict = Verdict{State: p.Result, Passed: p.Result == attest.ResultPassed, Reason: p.RunError}
	if p.Simulated {
		out.Warnings = append(out.Warnings, SimulatedWarning)
	}
	if len(p.Hardware) > 0 {
		if hw, err := hardware.Decode(p.Hardware); err == nil {
			out.Hardware = hw
			if hw.Simulated && !p.Simulated {
				out.Warnings = append(out.Warnings, SimulatedWarning)
			}
		} else {
			out.Warnings = append(out.Warnings, "hardware record in the predicate is not valid: "+firstLine(err.Error()))
		}
	}
	for _, b := range p.Benchmarks {
		for _, c := range b.Comparisons {
			if c.Verdict == "AMBIGUOUS" && c.Enforced {
				out.Warnings = append(out.Warnings, fmt.Sprintf("%s: case %s AMBIGUOUS against its %s: the gate could not tell", b.Step, b.Case, c.Against))
				out.Verdict.Warned = out.Verdict.Passed
			}
		}
	}
	for _, s := range p.Steps {
		out.Steps = append(out.Steps, Step{ID: s.ID, Kind: s.Kind, State: s.Verdict, Reason: s.Reason, Runner: s.Runner})
		if s.Verdict != "passed" && s.Verdict != "cached" {
			out.Verdict.Failures = append(out.Verdict.Failures, failureLine(s.ID, s.Verdict, s.Reason))
		}
	}
	for _, c := range p.Preflight {
		if c.Status == "failed" {
			out.Verdict.Failures = append(out.Verdict.Failures, failureLine("preflight/"+c.Check, c.Status, c.Message))
		}
	}
	if b := p.Build; b != nil {
		byStep := map[string]*Build{}
		var order []string
		for _, a := range b.Artifacts {
			bd := byStep[a.Step]
			if bd == nil {
				bd = &Build{Step: a.Step, Targets: b.Targets, Reproducible: b.Reproducible}
				byStep[a.Step] = bd
				order = append(order, a.Step)
			}
			in := &runtypes.Inspection{Path: a.Path, SHA256: a.SHA256, SASS: a.SASSArchs, PTX: a.PTXArchs}
			for _, c := range a.Cubins {
				in.Cubins = append(in.Cubins, runtypes.Cubin{Arch: c.Arch, SHA256: c.SHA256})
			}
			bd.Artifacts = append(bd.Artifacts, in)
		}
		for _, id := range order {
			out.Builds = append(out.Builds, *byStep[id])
		}
	}
	benches := map[string]*Benchmark{}
	var order []string
	for _, s := range p.Benchmarks {
		bm := benches[s.Step]
		if bm == nil {
			bm = &Benchmark{Step: s.Step}
			benches[s.Step] = bm
			order = append(order, s.Step)
		}
		bc := BenchCase{Name: s.Case, Status: "passed", Stats: &stats.Summary{N: s.Samples, Median: s.MedianNS,
			MedianCI: stats.Interval{Lo: s.CILowNS, Hi: s.CIHighNS, Level: 0.95}}}
		if len(s.Comparisons) > 0 {
			c := s.Comparisons[0]
			bm.Against = c.Against
			bc.Enforced = c.Enforced
			bc.Comparison = &stats.Comparison{Method: c.Method, Verdict: stats.Verdict(c.Verdict), CandidateMedian: s.MedianNS,
				Shift: stats.Shift{Delta: c.Delta, CI: stats.Interval{Lo: c.CILow, Hi: c.CIHigh}}}
		}
		bm.Cases = append(bm.Cases, bc)
	}
	for _, id := range order {
		bm := benches[id]
		switch bm.Against {
		case "reference":
			bm.AgainstLabel = "same-run reference"
		case "baseline":
			bm.AgainstLabel = "stored baseline"
		}
		out.Benchmarks = append(out.Benchmarks, *bm)
	}
	for _, b := range p.Burnin {
		out.Burnins = append(out.Burnins, Burnin{Step: b.Step, State: b.Verdict, Elapsed: fmt.Sprintf("%.0fs", b.DurationSeconds),
			Iterations: b.Iterations, Failures: b.Failures, OutputConsistent: b.OutputConsistent, LeakDetected: b.LeakDetected})
	}
	if t := p.Telemetry; t != nil {
		out.PredicateTelemetry = t
	}
	out.Preflight = p.Preflight
	if len(p.FailedSteps) > 0 && len(out.Verdict.Failures) == 0 {
		out.Verdict.Failures = append(out.Verdict.Failures, "failed: "+strings.Join(p.FailedSteps, ", "))
	}
}
