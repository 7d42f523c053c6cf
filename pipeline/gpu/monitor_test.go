//go:build linux && cgo

package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/pipeline"
)

func TestMonitor(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100")
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor(s, rec)
	p := &pipeline.Pipeline{Targets: []string{"sm_80", "sm_90"}, Preflight: &pipeline.Preflight{MinDriver: "535"}}
	step := &pipeline.Step{ID: "bench", GPU: true, Memory: pipeline.MustSize("8GiB"), Interval: pipeline.MustDuration("5ms")}

	report, err := m.Preflight(t.Context(), p, step, nil)
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
	if r := report.(*PreflightReport); !r.Simulated || len(r.Checks) == 0 {
		t.Errorf("report = %+v", r)
	}

	s.AddProcess(0, 31337, 78<<30)
	if _, err := m.Preflight(t.Context(), p, step, nil); err == nil ||
		!strings.Contains(err.Error(), "processes: gpu 0") || !strings.Contains(err.Error(), "memory: gpu 0") {
		t.Errorf("preflight with a busy GPU: err = %v", err)
	}

	dir := t.TempDir()
	w, err := m.Start(t.Context(), step, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.InjectXid(0, 79)
	sum, failure, err := w.Stop("")
	if err != nil {
		t.Fatal(err)
	}
	if failure != "gpu 0: fatal Xid 79 (GPU has fallen off the bus)" {
		t.Errorf("failure = %q", failure)
	}
	if sum.(*Summary).Samples < 2 {
		t.Errorf("summary = %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(dir, TelemetryFile)); err != nil {
		t.Error(err)
	}
}

func TestEmbedsPTX(t *testing.T) {
	t.Parallel()
	no := false
	tests := []struct {
		name  string
		steps []pipeline.Step
		want  bool
	}{
		{name: "no build", want: true},
		{name: "default", steps: []pipeline.Step{{Kind: "cuda-build"}}, want: true},
		{name: "ptx off", steps: []pipeline.Step{{Kind: "cuda-build", PTX: &no}}, want: false},
		{name: "one of two off", steps: []pipeline.Step{{Kind: "cuda-build", PTX: &no}, {Kind: "cuda-build"}}, want: true},
	}
	for _, tt := range tests {
		if got := embedsPTX(&pipeline.Pipeline{Steps: tt.steps}); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMonitorJudgesTheStepsGPU: on a 4-GPU machine, a step that sees
// GPUs 1 and 2 (CUDA_VISIBLE_DEVICES by index and UUID) is preflighted
// on those only (a busy GPU 0 does not fail it); telemetry watches those
// only (GPU 0's fatal Xid is not even received), and with the results
// naming GPU 2 judges GPU 2 alone: GPU 1's throttling does not count in
// the share and its fatal Xid is a note, not a failure.
func TestMonitorJudgesTheStepsGPU(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:4")
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor(s, rec)
	p := &pipeline.Pipeline{Targets: []string{"sm_90"}}
	step := &pipeline.Step{ID: "bench", GPU: true, Interval: pipeline.MustDuration("5ms")}
	env := []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=1," + rec.GPUs[2].UUID}
	s.AddProcess(0, 4242, 1<<30) // another tenant on GPU 0
	report, err := m.Preflight(t.Context(), p, step, env)
	if err != nil {
		t.Fatalf("preflight failed on a GPU the step does not see: %v", err)
	}
	if got := report.(*PreflightReport).GPUs; len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("preflight checked GPUs %v, want [1 2]", got)
	}

	w, err := m.Start(t.Context(), step, t.TempDir(), env)
	if err != nil {
		t.Fatal(err)
	}
	s.SetClockEventReasons(1, nvml.ClocksEventReasonSwPowerCap)
	s.InjectXid(0, 79)
	s.InjectXid(1, 48)
	sum, failure, err := w.Stop(rec.GPUs[2].UUID)
	if err != nil {
		t.Fatal(err)
	}
	got := sum.(*Summary)
	if failure != "" {
		t.Errorf("failure = %q: another GPU's Xid failed the step", failure)
	}
	if len(got.JudgedGPUs) != 1 || got.JudgedGPUs[0] != 2 || got.ThrottledSamples != 0 || got.Samples == 0 {
		t.Errorf("judged %v, throttled %d of %d samples; want GPU 2 only, none throttled", got.JudgedGPUs, got.ThrottledSamples, got.Samples)
	}
	if len(got.GPUs) != 2 || got.GPUs[0].Index != 1 || got.GPUs[1].Index != 2 {
		t.Errorf("watched %+v, want GPUs 1 and 2", got.GPUs)
	}
	for _, x := range got.XidEvents {
		if x.GPU == 0 {
			t.Errorf("received GPU 0's Xid %d", x.Xid)
		}
	}
	if notes := strings.Join(got.Notes, "\n"); !strings.Contains(notes, "gpu 1 (not the step's GPU, not judged): Xid 48") {
		t.Errorf("notes %q lack GPU 1's Xid", got.Notes)
	}
}

// A benchmark step that sets no interval is sampled at 10 Hz, any other
// step at DefaultInterval; a step's own interval wins.
func TestMonitorBenchmarkInterval(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100")
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor(s, rec)
	for _, tc := range []struct {
		step pipeline.Step
		want float64
	}{
		{pipeline.Step{ID: "bench", Kind: pipeline.KindBenchmark, GPU: true}, 0.1},
		{pipeline.Step{ID: "burn", Kind: pipeline.KindBurnin, GPU: true}, 1},
		{pipeline.Step{ID: "bench2", Kind: pipeline.KindBenchmark, GPU: true, Interval: pipeline.MustDuration("50ms")}, 0.05},
	} {
		w, err := m.Start(t.Context(), &tc.step, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sum, _, err := w.Stop("")
		if err != nil {
			t.Fatal(err)
		}
		if got := sum.(*Summary).IntervalSeconds; got != tc.want {
			t.Errorf("%s: interval %v s, want %v", tc.step.ID, got, tc.want)
		}
	}
}
