package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

	report, err := m.Preflight(t.Context(), p, step)
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
	if r := report.(*PreflightReport); !r.Simulated || len(r.Checks) == 0 {
		t.Errorf("report = %+v", r)
	}

	s.AddProcess(0, 31337, 78<<30)
	if _, err := m.Preflight(t.Context(), p, step); err == nil ||
		!strings.Contains(err.Error(), "processes: gpu 0") || !strings.Contains(err.Error(), "memory: gpu 0") {
		t.Errorf("preflight with a busy GPU: err = %v", err)
	}

	dir := t.TempDir()
	w, err := m.Start(t.Context(), step, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.InjectXid(0, 79)
	sum, failure, err := w.Stop()
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
