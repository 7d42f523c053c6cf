package suite

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// caseClocks takes the samples inside each window and the nearest one
// before and after it.
func TestCaseClocksWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var lines []runtypes.TelemetryLine
	for i := range 10 {
		sm, mem := uint32(1980-10*i), uint32(2619)
		l := runtypes.TelemetryLine{Time: t0.Add(time.Duration(i) * time.Second), Kind: "sample", SMClockMHz: &sm, MemClockMHz: &mem}
		if i == 5 {
			l.ClockEventReasons, l.Throttled = []string{"hw_slowdown"}, true
		}
		lines = append(lines, l)
	}
	at := func(s float64) int64 { return t0.Add(time.Duration(s * float64(time.Second))).UnixNano() }
	c := caseClocks(lines, []window{{at(3.5), at(5.5)}})
	if c == nil || c.Samples != 4 || *c.SMMaxMHz != 1950 || *c.SMMinMHz != 1920 || *c.MemMaxMHz != 2619 || c.Throttled != 1 || c.Reasons["hw_slowdown"] != 1 {
		t.Errorf("clocks %+v", c)
	}
	if c := caseClocks(lines, []window{{at(20), at(21)}}); c == nil || c.Samples != 1 || *c.SMMaxMHz != 1890 {
		t.Errorf("a window after the last sample takes the last: %+v", c)
	}
	if c := caseClocks(nil, []window{{at(1), at(2)}}); c != nil {
		t.Errorf("no telemetry: %+v", c)
	}
}

// A benchmark step records, for each case, the SM and memory clocks and
// the clock-event reasons telemetry saw around its samples: the real
// harness (CPU backend) says when its samples ran, telemetry samples the
// simulated H100 (go-nvml's dgxh100 mock, SIMULATED) at its power cap.
func TestBenchmarkCaseClocks(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "g++")
	bin := filepath.Join(t.TempDir(), "gpuattest-harness")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "g++", "-O2", "-std=c++17", "-pthread", "-o", bin, "../../kernels/harness/harness.cc", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("building the harness: %v\n%s", err, out)
	}
	sim, err := gpu.Simulate("h100")
	if err != nil {
		t.Fatal(err)
	}
	sim.SetClockEventReasons(0, nvml.ClocksEventReasonSwPowerCap)
	s := newContext(t, pipeline.Step{ID: "bench", Kind: "benchmark", Results: "out.json", Repeats: pipeline.Repeats{N: 40},
		Run: pipeline.Command{Argv: []string{bin, "--backend", "cpu", "--kernels", "vector_add,softmax", "--n", "262144", "--rows", "256", "--cols", "512", "--out", "out.json"}}})
	tel, err := gpu.StartTelemetry(t.Context(), sim, filepath.Join(s.StepDir, gpu.TelemetryFile), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Benchmark{}.Execute(t.Context(), s)
	if _, err := tel.Stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != step.Passed {
		t.Fatalf("status %s: %s", out.Status, out.Reason)
	}
	for _, c := range out.Details.(*BenchmarkDetails).Cases {
		k := c.Clocks
		if k == nil || k.Samples < 2 || k.SMMaxMHz == nil || *k.SMMaxMHz != 345 || k.MemMaxMHz == nil || *k.MemMaxMHz != 2619 ||
			k.Reasons["sw_power_cap"] != k.Samples || k.PowerCapped != k.Samples || k.Throttled != 0 {
			t.Errorf("%s: clocks %+v", c.Name, k)
		}
		if _, ok := c.Config[ConfigSampledFrom]; ok {
			t.Errorf("%s: the merged config keeps the sampling window: %v", c.Name, c.Config)
		}
	}
}
