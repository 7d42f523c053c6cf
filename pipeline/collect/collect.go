// Package collect turns a run directory (run.json, hardware.json and the
// steps' details) into the attest.Run that the statements are built from.
package collect

import (
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/digest"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/step"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// FromRunDir reads the run in dir, made from pipeline p, into an attest.Run.
// Paths in the result are slash paths relative to the pipeline's workdir
// (for files in the work tree) or to the run directory (steps/<id>/...).
func FromRunDir(dir string, p *pipeline.Pipeline) (*attest.Run, error) {
	rd, err := rundir.Open(dir)
	if err != nil {
		return nil, err
	}
	return FromRun(rd, p)
}

// FromRun turns a run read with rundir.Open, made from pipeline p, into an
// attest.Run.
func FromRun(rd *rundir.Run, p *pipeline.Pipeline) (*attest.Run, error) {
	rec := rd.Record
	if rec.Pipeline.Digest != p.Digest {
		return nil, fmt.Errorf("run %s was made from a different pipeline (digest %s, %s is %s)", rd.Dir, rec.Pipeline.Digest, p.Path, p.Digest)
	}
	c := &collector{dir: rd.Dir, p: p, rd: rd, run: &attest.Run{
		ID:             filepath.Base(filepath.Clean(rd.Dir)),
		PipelinePath:   pipelinePath(p),
		PipelineDigest: rec.Pipeline.Digest,
		LockDigest:     rec.LockDigest,
		StartedAt:      rec.StartedAt,
		Version:        rec.Version,
		Hardware:       rd.Hardware,
	}}
	if rec.FinishedAt != nil {
		c.run.FinishedAt = *rec.FinishedAt
	} else {
		c.run.FinishedAt = time.Now().UTC()
	}
	if rec.State != runtypes.Passed {
		c.run.RunError = fmt.Sprintf("run %s: %s", rec.State, rec.Reason)
	}
	if src := rec.Source; src != nil {
		c.run.Source = &attest.Source{URI: src.URI, Commit: src.Commit, Dirty: src.Dirty}
		// With a source, the pipeline is named from the work tree's top.
		c.run.PipelinePath = path.Join(src.Root, c.run.PipelinePath)
	}
	c.addToolchain(rd.Toolchain, "")
	for _, im := range rec.Images {
		c.run.Images = append(c.run.Images, attest.Image{
			Name: im.Name, URI: im.URI(), Digest: im.ManifestDigest(),
			IndexDigest: im.IndexDigest, ConfigDigest: im.ConfigDigest, Platform: im.Platform,
		})
	}
	for i := range p.Steps {
		if err := c.step(&p.Steps[i]); err != nil {
			return nil, err
		}
	}
	c.finishBuild()
	c.finishTelemetry()
	if err := c.gpuEvidence(rec.GPUEvidence); err != nil {
		return nil, err
	}
	return c.run, nil
}

// pipelinePath names the pipeline file as attestations do: relative to the
// pipeline's root (pipelines/release.yaml for a pipeline whose workdir is
// ..), never by where the tree lies on this machine.
func pipelinePath(p *pipeline.Pipeline) string {
	if p.Root != "" && p.Dir != "" {
		if rel, err := filepath.Rel(p.Root, filepath.Join(p.Dir, filepath.Base(p.Path))); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	if filepath.IsAbs(p.Path) {
		return filepath.Base(p.Path)
	}
	return filepath.ToSlash(p.Path)
}

type collector struct {
	dir string
	p   *pipeline.Pipeline
	rd  *rundir.Run
	run *attest.Run

	reproSeen, reproAll bool
	telemetry           []gpu.Summary
}

// rel names a step's file relative to the pipeline's workdir.
func (c *collector) rel(s *pipeline.Step, p string) string {
	if s.Workdir == "" {
		return path.Clean(p)
	}
	return path.Join(filepath.ToSlash(s.Workdir), p)
}

// file names a file a step reported: run-directory files keep their
// steps/<id>/ path, work-tree files are made relative to the workdir.
func (c *collector) file(s *pipeline.Step, f step.File) string {
	if strings.HasPrefix(f.Path, "steps/") {
		if _, err := os.Stat(filepath.Join(c.dir, filepath.FromSlash(f.Path))); err == nil {
			return f.Path
		}
	}
	return c.rel(s, f.Path)
}

func (c *collector) step(s *pipeline.Step) error {
	sr := c.rd.Step(s.ID)
	if sr == nil {
		return fmt.Errorf("run.json has no record of step %s", s.ID)
	}
	verdict := string(sr.State)
	if sr.State == runtypes.Passed && sr.Cache == "hit" {
		verdict = "cached"
	}
	runnerName := s.Runner
	if sr.Runner != nil {
		runnerName = sr.Runner.Name
	}
	v := attest.StepVerdict{ID: s.ID, Kind: s.Kind, Verdict: verdict, Reason: firstLine(sr.Reason), Runner: runnerName}
	c.where(s, sr, &v)
	c.run.Steps = append(c.run.Steps, v)

	for _, f := range sr.Artifacts {
		c.run.Artifacts = append(c.run.Artifacts, attest.FileDigest{Path: c.file(s, f), SHA256: f.SHA256, Step: s.ID, Kind: f.Kind})
	}
	for _, f := range sr.Results {
		c.run.Results = append(c.run.Results, attest.FileDigest{Path: c.file(s, f), SHA256: f.SHA256, Step: s.ID, Kind: f.Kind})
	}
	if s.Kind == pipeline.KindCUDABuild {
		seen := map[string]bool{}
		for _, f := range sr.Inputs {
			seen[f.Path] = true
			c.run.Sources = append(c.run.Sources, attest.FileDigest{Path: c.rel(s, f.Path), SHA256: f.SHA256, Step: s.ID, Kind: "source"})
		}
		// Every other file the compiler read, as nvcc listed it: headers
		// in the tree by their path in it, files of this machine by
		// absolute path. Files in the step's image are pinned by the
		// image's digest, listed already.
		for _, r := range sr.Reads {
			if r.SHA256 == "" || seen[r.Path] {
				continue
			}
			p, kind := c.rel(s, r.Path), "read"
			if path.IsAbs(r.Path) {
				p, kind = r.Path, "host-read"
			}
			c.run.Sources = append(c.run.Sources, attest.FileDigest{Path: p, SHA256: r.SHA256, Step: s.ID, Kind: kind})
		}
	}
	for _, log := range []string{runlayout.StdoutLog, runlayout.StderrLog} {
		rel := runlayout.StepRel(s.ID, log)
		if sum, _, err := digest.File(filepath.Join(c.dir, filepath.FromSlash(rel))); err == nil {
			c.run.Byproducts = append(c.run.Byproducts, attest.FileDigest{Path: rel, SHA256: sum, Step: s.ID, Kind: "log"})
		}
	}
	if sr.Preflight != nil {
		c.addPreflight(s.ID, sr.Preflight)
	}
	if sr.Telemetry != nil {
		c.telemetry = append(c.telemetry, *sr.Telemetry)
	}
	c.buildStep(s, sr)
	if err := c.suiteCases(s, sr); err != nil {
		return err
	}
	if sr.Test != nil {
		c.coverage(s, sr.Test.Coverage)
	}
	switch {
	case sr.Outputs != nil:
		c.outputs(s, sr.Outputs)
	case sr.Build != nil:
		c.build(s, sr.Build)
	case sr.Benchmark != nil:
		c.benchmark(s, sr.Benchmark)
	case sr.Burnin != nil:
		c.burnin(s, sr, sr.Burnin)
	}
	return nil
}

func (c *collector) build(s *pipeline.Step, d *cuda.BuildDetails) {
	c.addToolchain(d.Toolchain, c.imageURI(s))
	if c.run.Build == nil {
		c.run.Build = &attest.BuildFacts{Targets: append([]string(nil), c.p.Targets...)}
	}
	for _, a := range d.Artifacts {
		ba := attest.BuildArtifact{Step: s.ID, Path: c.rel(s, a.Path), SHA256: a.SHA256, SASSArchs: nonNil(a.SASS), PTXArchs: nonNil(a.PTX)}
		for _, cb := range a.Cubins {
			ba.Cubins = append(ba.Cubins, attest.CubinDigest{Arch: cb.Arch, SHA256: cb.SHA256})
		}
		c.run.Build.Artifacts = append(c.run.Build.Artifacts, ba)
	}
	c.repro(s, d.Reproducibility)
}

// repro notes a step's reproducibility check (r nil: none ran) and its
// report as a byproduct.
func (c *collector) repro(s *pipeline.Step, r *cuda.ReproReport) {
	if r != nil {
		if !c.reproSeen {
			c.reproAll = true
		}
		c.reproSeen = true
		c.reproAll = c.reproAll && r.Reproducible
	}
	if sum, _, err := digest.File(runlayout.StepFile(c.dir, s.ID, runlayout.ReproFile)); err == nil {
		c.run.Byproducts = append(c.run.Byproducts, attest.FileDigest{Path: runlayout.StepRel(s.ID, runlayout.ReproFile), SHA256: sum, Step: s.ID, Kind: "reproducibility"})
	}
}

// outputs lists an exec step's released outputs in the build facts,
// with the device code each holds (none, for host files).
func (c *collector) outputs(s *pipeline.Step, d *cuda.OutputsReport) {
	if c.run.Build == nil {
		c.run.Build = &attest.BuildFacts{Targets: append([]string(nil), c.p.Targets...)}
	}
	for _, f := range d.Files {
		ba := attest.BuildArtifact{Step: s.ID, Path: c.rel(s, f.Path), SHA256: f.SHA256, SASSArchs: nonNil(f.SASS), PTXArchs: nonNil(f.PTX),
			Kind: f.Kind, NoDeviceCode: !f.DeviceCode}
		for _, cb := range f.Cubins {
			ba.Cubins = append(ba.Cubins, attest.CubinDigest{Arch: cb.Arch, SHA256: cb.SHA256})
		}
		c.run.Build.Artifacts = append(c.run.Build.Artifacts, ba)
	}
	c.repro(s, d.Reproducibility)
}

// coverage adds a test step's coverage reports to the run's totals.
func (c *collector) coverage(s *pipeline.Step, files []suite.CoverageFile) {
	for _, f := range files {
		if c.run.Coverage == nil {
			c.run.Coverage = &attest.CoverageFacts{Files: []attest.CoverageFile{}}
		}
		t := attest.CoverageTotals{Lines: f.Lines, LinesFound: f.LinesFound, LinesHit: f.LinesHit,
			Branches: f.Branches, BranchesFound: f.BranchesFound, BranchesHit: f.BranchesHit}
		c.run.Coverage.Files = append(c.run.Coverage.Files, attest.CoverageFile{Step: s.ID, Path: f.Copy, SHA256: f.SHA256, Format: f.Format, CoverageTotals: t})
		all := &c.run.Coverage.CoverageTotals
		all.LinesFound += f.LinesFound
		all.LinesHit += f.LinesHit
		all.BranchesFound += f.BranchesFound
		all.BranchesHit += f.BranchesHit
		if all.LinesFound > 0 {
			all.Lines = float64(all.LinesHit) / float64(all.LinesFound)
		}
		if all.BranchesFound > 0 {
			b := float64(all.BranchesHit) / float64(all.BranchesFound)
			all.Branches = &b
		}
	}
}

func (c *collector) finishBuild() {
	if c.run.Build != nil && c.reproSeen {
		r := c.reproAll
		c.run.Build.Reproducible = &r
	}
}

func (c *collector) benchmark(s *pipeline.Step, d *suite.BenchmarkDetails) {
	gate := "none"
	if d.Gate != nil {
		gate = "passed"
		if sr := c.rd.Step(s.ID); sr != nil && sr.State != runtypes.Passed {
			gate = "failed"
		}
	}
	for _, bc := range d.Cases {
		if bc.Stats == nil {
			continue
		}
		bs := attest.BenchmarkSummary{Step: s.ID, Case: bc.Name, MedianNS: bc.Stats.Median,
			CILowNS: bc.Stats.MedianCI.Lo, CIHighNS: bc.Stats.MedianCI.Hi, Samples: bc.Stats.N, Status: bc.Status, Gate: gate}
		if bc.Roofline != nil && bc.Roofline.Attained != nil {
			a := *bc.Roofline.Attained
			bs.RooflineAttained = &a
		}
		if d.Reference != nil {
			n := len(bs.Comparisons)
			bs.Comparisons = appendComparison(bs.Comparisons, "reference", d.Reference.Report, true, bc.Name)
			if d.Reference.Release != nil {
				for i := n; i < len(bs.Comparisons); i++ {
					bs.Comparisons[i].Release = d.Reference.Release.Digest
				}
			}
		}
		if d.Gate != nil {
			bs.Comparisons = appendComparison(bs.Comparisons, "baseline", d.Gate.Report, d.Gate.Enforced, bc.Name)
		}
		switch {
		case bc.GBPS > 0:
			bs.Throughput = &attest.Throughput{Value: bc.GBPS, Unit: "GB/s"}
		case bc.GFLOPS > 0:
			bs.Throughput = &attest.Throughput{Value: bc.GFLOPS, Unit: "GFLOP/s"}
		}
		c.run.Benchmarks = append(c.run.Benchmarks, bs)
	}
	c.run.Floors = append(c.run.Floors, d.Floors...)
}

// appendComparison adds case name's verdict from rep, when rep has it.
func appendComparison(out []attest.BenchmarkComparison, against string, rep *suite.Report, enforced bool, name string) []attest.BenchmarkComparison {
	if rep == nil {
		return out
	}
	for _, c := range rep.Cases {
		if c.Name == name {
			out = append(out, attest.BenchmarkComparison{Against: against, Method: c.Method, Verdict: string(c.Verdict),
				Delta: c.Shift.Delta, CILow: c.Shift.CI.Lo, CIHigh: c.Shift.CI.Hi, Enforced: enforced})
		}
	}
	return out
}

func (c *collector) burnin(s *pipeline.Step, sr *rundir.Step, d *suite.BurninDetails) {
	dur, _ := time.ParseDuration(d.Elapsed)
	req, _ := time.ParseDuration(d.Requested)
	failures := 0
	if d.FailedIteration > 0 {
		failures = 1
	}
	leak := false
	for _, t := range []*suite.Trend{d.HostRSS, d.DeviceMemory} {
		if t != nil && t.SlopePerIteration != nil && *t.SlopePerIteration > float64(d.LeakToleranceBytes) {
			leak = true
		}
	}
	b := attest.BurninSummary{
		Step: s.ID, RequestedSeconds: req.Seconds(), DurationSeconds: dur.Seconds(), Completed: d.Completed, Sustained: d.Sustained,
		Iterations: d.Iterations, Failures: failures, OutputConsistent: len(d.Mismatches) == 0, LeakDetected: leak,
		DutyCycle: d.DutyCycle, MinDutyCycle: d.MinDutyCycle, Verdict: string(sr.State),
	}
	if sr.Telemetry != nil {
		b.Telemetry = stepTelemetry(sr.Telemetry, d.ThrottleShare)
	}
	c.run.Burnin = append(c.run.Burnin, b)
	c.run.Floors = append(c.run.Floors, d.Floors...)
}

// addPreflight adds the outcome of each check the preflight of step id
// made.
func (c *collector) addPreflight(id string, r *gpu.PreflightReport) {
	for _, ch := range r.Checks {
		c.run.Preflight = append(c.run.Preflight, attest.PreflightCheck{Step: id, Check: ch.Name, GPU: ch.GPU,
			Status: string(ch.Status), Seen: ch.Seen, Required: ch.Required, Message: ch.Message})
	}
}

func (c *collector) finishTelemetry() {
	if len(c.telemetry) == 0 {
		return
	}
	t := &attest.TelemetrySummary{}
	reasons := map[string]bool{}
	for _, s := range c.telemetry {
		if s.TemperatureMaxC != nil {
			t.MaxTemperatureC = max(t.MaxTemperatureC, float64(*s.TemperatureMaxC))
		}
		if s.PowerMaxWatts != nil {
			t.MaxPowerW = max(t.MaxPowerW, *s.PowerMaxWatts)
		}
		t.XidEvents += len(s.XidEvents)
		for _, g := range s.GPUs {
			if g.DoubleBitBefore != nil && g.DoubleBitAfter != nil && *g.DoubleBitAfter > *g.DoubleBitBefore {
				t.ECCErrorsDelta += int64(*g.DoubleBitAfter - *g.DoubleBitBefore)
			}
		}
		for r := range s.ThrottleReasons {
			reasons[r] = true
		}
	}
	for r := range reasons {
		t.ThrottleReasons = append(t.ThrottleReasons, r)
	}
	sort.Strings(t.ThrottleReasons)
	c.run.Telemetry = t
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// addToolchain adds tc's nvcc and the binaries nvcc drives to the run's
// toolchain, once each (by name, image and digest); image is the URI of
// the image tc was taken in, empty on the host.
func (c *collector) addToolchain(tc *cuda.Toolchain, image string) {
	if tc == nil {
		return
	}
	tools := []attest.Tool{{Name: "nvcc", Version: tc.Release, SHA256: firstNonEmpty(tc.NVCCBinarySHA256, tc.NVCCSHA256),
		Path: firstNonEmpty(tc.NVCCBinary, tc.NVCC), Image: image}}
	for _, t := range tc.Tools {
		tools = append(tools, attest.Tool{Name: t.Name, Version: tc.Release, SHA256: t.SHA256, Path: t.Path, Image: image})
	}
	for _, t := range tools {
		if !slices.ContainsFunc(c.run.Toolchain, func(o attest.Tool) bool {
			return o.Name == t.Name && o.Image == t.Image && o.SHA256 == t.SHA256
		}) {
			c.run.Toolchain = append(c.run.Toolchain, t)
		}
	}
}

// imageURI is the URI by digest of the image step s ran in, "" when it
// ran in none.
func (c *collector) imageURI(s *pipeline.Step) string {
	if s.Image == "" {
		return ""
	}
	for _, im := range c.rd.Record.Images {
		if im.Name == s.Image {
			return im.URI()
		}
	}
	return ""
}

// buildStep records a cuda-build or exec step, normalised, for the
// provenance.
func (c *collector) buildStep(s *pipeline.Step, sr *rundir.Step) {
	kind := s.Kind
	if kind == "" {
		kind = pipeline.KindExec
	}
	if kind != pipeline.KindCUDABuild && kind != pipeline.KindExec {
		return
	}
	bs := attest.BuildStep{ID: s.ID, Kind: kind, Needs: s.Needs, Workdir: path.Clean(filepath.ToSlash(firstNonEmpty(s.Workdir, "."))),
		Runner: firstNonEmpty(s.Runner, c.p.Runner, "host"), Image: c.imageURI(s)}
	if sr.Runner != nil && sr.Runner.Name != "" {
		bs.Runner = sr.Runner.Name
	}
	if kind == pipeline.KindExec {
		bs.Run = s.Run.Args()
		bs.Outputs = s.Outputs
	} else {
		bs.Sources, bs.Flags, bs.Reproducible = s.Sources, s.Flags, firstNonEmpty(s.Reproducible, "off")
		bs.Targets = append([]string(nil), c.p.Targets...)
		bs.Output = firstNonEmpty(s.Output, pipeline.OutputFatbin)
		if d := sr.Build; d != nil {
			bs.Targets = d.Targets
			for _, cmd := range d.Commands {
				bs.Commands = append(bs.Commands, cmd.Argv)
			}
			for _, a := range d.Artifacts {
				bs.Outputs = append(bs.Outputs, a.Path)
			}
		}
	}
	c.run.BuildSteps = append(c.run.BuildSteps, bs)
}
