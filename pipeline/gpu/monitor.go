package gpu

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/hardware"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
)

// TelemetryFile is the name of the telemetry file in a step's directory.
const TelemetryFile = "telemetry.jsonl"

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
	// Checks are every check with its status.
	Checks []Check `json:"checks"`
}

// Preflight probes the GPUs and checks them for step s of p: p.Preflight,
// the code the pipeline's builds embed (p.Targets, with PTX for the
// highest unless every cuda-build step sets ptx: false) and s.Memory. The
// error is a *PreflightError naming every failed check, or a bad-input
// error naming the field.
func (m *Monitor) Preflight(ctx context.Context, p *pipeline.Pipeline, s *pipeline.Step) (any, error) {
	live, err := Probe(ctx, m.src)
	if err != nil && !errors.Is(err, ErrNoGPU) {
		return nil, fmt.Errorf("probing GPUs before step %s: %w", s.ID, err)
	}
	checks, err := Preflight(m.rec, p.Preflight, BuildCode(p.Targets, embedsPTX(p)), s.Memory, live)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", s.ID, err)
	}
	return &PreflightReport{Simulated: m.rec.Simulated, Checks: checks}, Err(checks)
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

// Start starts telemetry for step s into stepDir/telemetry.jsonl at the
// step's interval (DefaultInterval when unset).
func (m *Monitor) Start(ctx context.Context, s *pipeline.Step, stepDir string) (*Watch, error) {
	interval := DefaultInterval
	if !s.Interval.IsZero() {
		interval = s.Interval.Value()
	}
	t, err := StartTelemetry(ctx, m.src, filepath.Join(stepDir, TelemetryFile), interval)
	if err != nil {
		return nil, fmt.Errorf("starting telemetry for step %s: %w", s.ID, err)
	}
	return &Watch{t: t}, nil
}

// Watch is telemetry running around one step.
type Watch struct{ t *Telemetry }

// Stop ends telemetry. It returns the *Summary, and when the verdict
// failed, the reasons in one line (the step must fail whatever its results
// say).
func (w *Watch) Stop() (summary any, failure string, err error) {
	sum, err := w.t.Stop()
	if sum != nil && sum.Verdict.Status == VerdictFailed {
		failure = strings.Join(sum.Verdict.Reasons, "; ")
	}
	return sum, failure, err
}
