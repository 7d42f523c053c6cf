package gpu

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/runlayout"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/envlist"

	"github.com/gpuattest/gpuattest/pipeline"
)

// TelemetryFile is the name of the telemetry file in a step's directory.
const TelemetryFile = runlayout.TelemetryFile

// Monitor runs preflight before, and telemetry around, the gpu: true steps
// of a run, for one source and the record collected from it. Its methods
// match what the run engine asks of a GPU monitor.
type Monitor struct {
	src Source
	rec *hardware.Record
}

// NewMonitor returns a Monitor for src, whose hardware record is rec (from
// Collect with the same source).
func NewMonitor(src Source, rec *hardware.Record) *Monitor {
	return &Monitor{src: src, rec: rec}
}

// PreflightReport is what preflight stores in run.json for a step.
type PreflightReport struct {
	// Simulated is true when the checks ran on simulated GPUs.
	Simulated bool `json:"simulated"`
	// GPUs are the NVML indices of the GPUs checked: those the step's
	// CUDA_VISIBLE_DEVICES leaves visible.
	GPUs []int `json:"gpus"`
	// Note says why every GPU was checked when the step's
	// CUDA_VISIBLE_DEVICES could not be matched to the record.
	Note string `json:"note,omitempty"`
	// Checks are every check with its status.
	Checks []Check `json:"checks"`
}

// Preflight probes the GPUs and checks those step s can see (env is its
// environment: CUDA_VISIBLE_DEVICES, see hardware.Record.Visible; every
// GPU when it cannot be matched to the record) for p: p.Preflight, the
// code the pipeline's builds embed (p.Targets, with PTX for the highest
// unless every cuda-build step sets ptx: false) and s.Memory. The error
// is a *PreflightError naming every failed check, or a bad-input error
// naming the field. opts go to Preflight (WithToolkit: the build's CUDA
// release). A build without NVML (not linux with cgo) refuses with
// Unsupported.
func (m *Monitor) Preflight(ctx context.Context, p *pipeline.Pipeline, s *pipeline.Step, env []string, opts ...PreflightOption) (any, error) {
	if err := Unsupported(); err != nil {
		return nil, fmt.Errorf("step %s: %w", s.ID, err)
	}
	live, err := Probe(ctx, m.src)
	if err != nil && !errors.Is(err, ErrNoGPU) {
		return nil, fmt.Errorf("probing GPUs before step %s: %w", s.ID, err)
	}
	gpus, note := m.visible(env)
	sub := *m.rec
	sub.GPUs = nil
	for _, g := range m.rec.GPUs {
		if slices.Contains(gpus, g.Index) {
			sub.GPUs = append(sub.GPUs, g)
		}
	}
	checks, err := Preflight(&sub, p.Preflight, BuildCode(p.Targets, embedsPTX(p)), s.Memory, live, opts...)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", s.ID, err)
	}
	return &PreflightReport{Simulated: m.rec.Simulated, GPUs: gpus, Note: note, Checks: checks}, Err(checks)
}

// visible returns the NVML indices of the GPUs a step with environment
// env sees; every GPU of the record, with a note saying why, when its
// CUDA_VISIBLE_DEVICES cannot be matched to the record.
func (m *Monitor) visible(env []string) ([]int, string) {
	all := make([]int, 0, len(m.rec.GPUs))
	for _, g := range m.rec.GPUs {
		all = append(all, g.Index)
	}
	pos, err := m.rec.Visible(envlist.Func(env))
	if err != nil {
		return all, "every GPU: " + err.Error()
	}
	var out []int
	for _, p := range pos {
		out = append(out, m.rec.GPUs[p].Index)
	}
	return out, ""
}

func embedsPTX(p *pipeline.Pipeline) bool {
	builds := 0
	for _, s := range p.Steps {
		if s.Kind != pipeline.KindCUDABuild {
			continue
		}
		builds++
		if s.PTX == nil || *s.PTX {
			return true
		}
	}
	return builds == 0
}

// BenchmarkInterval is the telemetry interval of a benchmark step that
// sets none (10 Hz): a case's samples last well under a second, and the
// step records the clocks and clock-event reasons around each.
const BenchmarkInterval = 100 * time.Millisecond

// Start starts telemetry for step s into stepDir/telemetry.jsonl at the
// step's interval (DefaultInterval when unset, BenchmarkInterval for a
// benchmark step), watching the GPUs the step can see (env is its
// environment, as for Preflight). A test or burn-in step fails on
// corrected memory errors (FailOnCorrectedErrors); every NVML call is
// bounded by DefaultCallTimeout.
func (m *Monitor) Start(ctx context.Context, s *pipeline.Step, stepDir string, env []string) (*Watch, error) {
	interval := DefaultInterval
	if s.Kind == pipeline.KindBenchmark {
		interval = BenchmarkInterval
	}
	if !s.Interval.IsZero() {
		interval = s.Interval.Value()
	}
	var opts []TelemetryOption
	if gpus, _ := m.visible(env); len(gpus) > 0 {
		opts = append(opts, WatchGPUs(gpus...))
	}
	if s.Kind == pipeline.KindTest || s.Kind == pipeline.KindBurnin {
		// Their memory sweeps and the burn's stream are there to find a
		// weak cell, which ECC corrects: a corrected error fails them.
		opts = append(opts, FailOnCorrectedErrors())
	}
	t, err := StartTelemetry(ctx, m.src, filepath.Join(stepDir, TelemetryFile), interval, opts...)
	if err != nil {
		return nil, fmt.Errorf("starting telemetry for step %s: %w", s.ID, err)
	}
	return &Watch{t: t}, nil
}

// Watch is telemetry running around one step.
type Watch struct{ t *Telemetry }

// Stop ends telemetry and judges the GPU whose UUID is device (the one
// the step's results name; every watched GPU when empty or not watched).
// It returns the *Summary, and when the verdict failed, the reasons in
// one line (the step must fail whatever its results say).
func (w *Watch) Stop(device string) (summary any, failure string, err error) {
	sum, err := w.t.StopFor(device)
	if sum != nil && sum.Verdict.Status == VerdictFailed {
		failure = strings.Join(sum.Verdict.Reasons, "; ")
	}
	return sum, failure, err
}
