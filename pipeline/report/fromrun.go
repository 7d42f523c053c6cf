package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// SimulatedWarning is the banner of a report whose hardware record is
// simulated, worded as the CLI words it.
const SimulatedWarning = "hardware: SIMULATED (GPUATTEST_FAKE_GPU); not a real GPU"

// cpuWarning is the banner of a report whose suites ran on the CPU backend.
func cpuWarning(steps []string) string {
	return fmt.Sprintf("backend: CPU: the results of %s come from the harness's CPU backend; no GPU ran these kernels", strings.Join(steps, ", "))
}

// FromRunDir reads the run directory dir (rundir.Open) and builds its
// report.
func FromRunDir(dir string) (*Report, error) {
	r, err := rundir.Open(dir)
	if err != nil {
		return nil, err
	}
	return FromRun(r)
}

// FromRun gathers the report of the run r: run.json, the hardware record,
// every step's facts, the raw benchmark samples, burn-in series and
// telemetry, and the subjects of the run's signed attestations (read, not
// verified: use FromVerification for that).
func FromRun(r *rundir.Run) (*Report, error) {
	rec := r.Record
	rep := &Report{
		Source:         r.Dir,
		Pipeline:       rec.Pipeline.Name,
		PipelineDigest: rec.Pipeline.Digest,
		Version:        rec.Version,
		StartedAt:      rec.StartedAt,
		Hardware:       r.Hardware,
		Verdict:        Verdict{State: string(rec.State), Passed: rec.State == runtypes.Passed, Reason: rec.Reason},
	}
	if rec.FinishedAt != nil {
		rep.FinishedAt = *rec.FinishedAt
	}
	if (r.Hardware != nil && r.Hardware.Simulated) || (rec.Hardware != nil && rec.Hardware.Simulated) {
		rep.Warnings = append(rep.Warnings, SimulatedWarning)
	}
	if ws := rec.Warnings(); len(ws) > 0 {
		rep.Warnings = append(rep.Warnings, ws...)
		rep.Verdict.Warned = rep.Verdict.Passed
	}
	var cpu []string
	for _, st := range r.Steps {
		rep.Steps = append(rep.Steps, stepOf(st.StepRecord))
		if st.State != runtypes.Passed && st.State != runtypes.Pending && st.State != runtypes.Running && st.State != runtypes.Skipped {
			rep.Verdict.Failures = append(rep.Verdict.Failures, failureLine(st.ID, string(st.State), st.Reason))
		}
		switch {
		case st.Build != nil:
			b := Build{Step: st.ID, Targets: st.Build.Targets, Output: st.Build.Output, Artifacts: st.Build.Artifacts,
				ArchProblems: st.Build.ArchProblems, Repro: st.Build.Reproducibility, Cached: st.Cache == "hit"}
			if st.Build.Reproducibility != nil {
				ok := st.Build.Reproducibility.Reproducible
				b.Reproducible = &ok
			}
			rep.Builds = append(rep.Builds, b)
		case st.Outputs != nil:
			rep.Builds = append(rep.Builds, execBuild(st))
		case st.Test != nil:
			if st.Test.Backend == "cpu" {
				cpu = append(cpu, st.ID)
			}
		case st.Benchmark != nil:
			full, err := r.BenchmarkSamples(st.ID)
			if err != nil {
				return nil, err
			}
			if full == nil {
				full = st.Benchmark
			}
			if full.Backend == "cpu" {
				cpu = append(cpu, st.ID)
			}
			rep.Benchmarks = append(rep.Benchmarks, benchmarkOf(st.ID, full))
		case st.Burnin != nil:
			rep.Burnins = append(rep.Burnins, burninOf(st.ID, string(st.State), st.Burnin))
		}
		lines, err := r.Telemetry(st.ID)
		if err != nil {
			return nil, err
		}
		if st.Telemetry != nil || len(lines) > 0 {
			t := Telemetry{Step: st.ID, Summary: st.Telemetry, Lines: lines}
			t.Simulated = st.Telemetry != nil && st.Telemetry.Simulated
			for _, l := range lines {
				t.Simulated = t.Simulated || l.Simulated
			}
			rep.Telemetry = append(rep.Telemetry, t)
		}
	}
	if len(cpu) > 0 {
		rep.Warnings = append(rep.Warnings, cpuWarning(cpu))
	}
	raw, err := r.Attestations()
	if err != nil {
		return nil, err
	}
	if raw != nil {
		subj, err := signedSubjects(rundir.AttestationsFile, raw)
		if err != nil {
			return nil, err
		}
		rep.Subjects = subj
		rep.SubjectsNote = "from the run's " + rundir.AttestationsFile + ", read without verifying its signatures (gpuattest report --bundle verifies)"
	}
	return rep, nil
}

func failureLine(id, state, reason string) string {
	line := id + ": " + state
	if reason != "" {
		line += ": " + firstLine(reason)
	}
	return line
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func stepOf(sr *engine.StepRecord) Step {
	s := Step{ID: sr.ID, Kind: sr.Kind, State: string(sr.State), Cache: sr.Cache, Reason: sr.Reason, ExitCode: sr.ExitCode}
	if sr.StartedAt != nil {
		s.Start = *sr.StartedAt
	}
	if sr.FinishedAt != nil {
		s.End = *sr.FinishedAt
		s.Duration = s.End.Sub(s.Start)
	} else if sr.DurationMS > 0 {
		s.Duration = time.Duration(sr.DurationMS) * time.Millisecond
	}
	if sr.Runner != nil {
		s.Runner = sr.Runner.Name
	}
	if s.Kind == "" {
		s.Kind = pipeline.KindExec
	}
	return s
}

// benchmarkOf turns a benchmark's details (with samples, from
// benchmark.json, or without, from run.json) into its report.
func benchmarkOf(id string, d *suite.BenchmarkDetails) Benchmark {
	b := Benchmark{Step: id, Backend: d.Backend, Device: d.Device}
	var (
		cmp      map[string]*stats.Comparison
		against  map[string][]float64
		enforced bool
	)
	switch {
	case d.Reference != nil:
		b.Against = "reference"
		b.AgainstLabel = fmt.Sprintf("same-run reference, %d rounds a side in ABBA blocks", d.Reference.Rounds)
		if sq := d.Reference.Sequential; sq != nil {
			b.AgainstLabel = fmt.Sprintf("same-run reference, rounds: auto, %d pairs in ABBA blocks (stopped: %s; budget %d pairs, %s)", d.Reference.Rounds, sq.Stop, sq.MaxRounds, sq.Budget)
		}
		against = map[string][]float64{}
		for _, c := range d.Reference.Cases {
			against[c.Name] = c.SamplesNS
		}
		enforced = true
		if d.Reference.Report != nil {
			b.Gate = &d.Reference.Report.Gate
			cmp = comparisons(d.Reference.Report)
		}
	case d.Gate != nil:
		b.Against = "baseline"
		b.AgainstLabel = "stored baseline " + d.Gate.Baseline
		b.Refused = d.Gate.Refused
		enforced = d.Gate.Enforced
		if d.Gate.Report != nil {
			b.Gate = &d.Gate.Report.Gate
			cmp = comparisons(d.Gate.Report)
		}
	}
	for _, c := range d.Cases {
		bc := BenchCase{Name: c.Name, Status: c.Status, Samples: c.SamplesNS, Stats: c.Stats, Against: against[c.Name], Enforced: enforced}
		if v, ok := cmp[c.Name]; ok {
			bc.Comparison = v
			bc.AgainstMedian = v.BaselineMedian
		}
		b.Cases = append(b.Cases, bc)
	}
	// Cases only on the other side (MISSING) still get a row.
	var missing []string
	for name := range cmp {
		if !hasCase(d.Cases, name) {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		v := cmp[name]
		b.Cases = append(b.Cases, BenchCase{Name: name, Status: "missing", Against: against[name], AgainstMedian: v.BaselineMedian, Comparison: v, Enforced: enforced})
	}
	return b
}

func hasCase(cases []suite.BenchmarkCase, name string) bool {
	for _, c := range cases {
		if c.Name == name {
			return true
		}
	}
	return false
}

func comparisons(r *suite.Report) map[string]*stats.Comparison {
	m := map[string]*stats.Comparison{}
	for i := range r.Cases {
		m[r.Cases[i].Name] = &r.Cases[i].Comparison
	}
	return m
}

func burninOf(id, state string, d *suite.BurninDetails) Burnin {
	b := Burnin{Step: id, State: state, Details: d, Requested: d.Requested, Elapsed: d.Elapsed, Iterations: d.Iterations,
		OutputConsistent: len(d.Mismatches) == 0}
	if d.FailedIteration > 0 {
		b.Failures = 1
	}
	tol := float64(d.LeakToleranceBytes)
	for _, t := range []*suite.Trend{d.HostRSS, d.DeviceMemory} {
		if t != nil && t.SlopePerIteration != nil && *t.SlopePerIteration > tol {
			b.LeakDetected = true
		}
	}
	return b
}

// signedSubjects lists the subjects of every statement in a JSON Lines
// file of Sigstore bundles, without verifying any signature.
func signedSubjects(name string, raw []byte) ([]Subject, error) {
	entries, err := verify.ParseBundles(name, raw)
	if err != nil {
		return nil, err
	}
	var out []Subject
	for _, e := range entries {
		if e.Problem != "" {
			return nil, fmt.Errorf("%s: %s", e.Source, e.Problem)
		}
		st, err := sign.UnverifiedStatement(e.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Source, err)
		}
		out = append(out, subjectsOf(st)...)
	}
	return out, nil
}

func subjectsOf(st *attest.Statement) []Subject {
	var out []Subject
	for _, s := range st.Subject {
		d := ""
		if h := s.Digest["sha256"]; h != "" {
			d = "sha256:" + h
		} else {
			for alg, h := range s.Digest {
				d = alg + ":" + h
				break
			}
		}
		out = append(out, Subject{Name: s.Name, Digest: d, PredicateType: st.PredicateType})
	}
	return out
}

// errNoVerified is returned when a verification verified no bundle.
var errNoVerified = errors.New("no bundle verified: a report of an unverified bundle is not made")

// decodePredicate decodes a validation predicate.
func decodePredicate(raw json.RawMessage) (*attest.ValidationPredicate, error) {
	var p attest.ValidationPredicate
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decoding the validation predicate: %w", err)
	}
	return &p, nil
}

// execBuild is an exec step's released outputs as a build: the device
// code in each (an output without any shows empty SASS and PTX), the
// pinned targets missing from them and its reproducibility check.
func execBuild(st *rundir.Step) Build {
	o := st.Outputs
	b := Build{Step: st.ID, Targets: o.Targets, Output: "exec outputs", ArchProblems: o.Problems, Repro: o.Reproducibility, Cached: st.Cache == "hit"}
	for _, f := range o.Files {
		b.Artifacts = append(b.Artifacts, &runtypes.Inspection{Path: f.Path, SHA256: f.SHA256, Size: f.Size, SASS: nonNilStrings(f.SASS), PTX: nonNilStrings(f.PTX), Cubins: f.Cubins})
	}
	if o.Reproducibility != nil {
		ok := o.Reproducibility.Reproducible
		b.Reproducible = &ok
	}
	return b
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
