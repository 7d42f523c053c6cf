//go:build linux && cgo

package gpu

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline"
)

// A GPU whose NVML calls stop returning (a sick GPU hangs the driver)
// cannot hang telemetry, and so gpuattest: every round of calls for a
// GPU is bounded, the GPU is given up as hung (its later calls are not
// made) and the verdict fails naming it, while the other GPUs are still
// sampled. Before, Stop waited for the sampling loop forever.
// SIMULATED: go-nvml's dgxh100 mock, one call made to block.
func TestTelemetryHungNVMLCall(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:2")
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	power := s.Device(1).GetPowerUsageFunc
	hang := make(chan bool, 1)
	hang <- false
	s.Device(1).GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if h := <-hang; h {
			hang <- true
			<-block
		}
		hang <- true // every call after the first blocks
		return power()
	}
	path := filepath.Join(t.TempDir(), "telemetry.jsonl")
	tel, err := StartTelemetry(t.Context(), s, path, 20*time.Millisecond, WithCallTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	start := time.Now()
	sum, err := tel.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Stop took %v with a hung GPU", d)
	}
	want := "gpu 1 (" + s.Device(1).UUID + "): NVML stopped answering: a sample (temperature, power, clocks, memory, utilization) did not return within 300ms"
	if sum.Verdict.Status != VerdictFailed || !hasLine(sum.Verdict.Reasons, want) || len(sum.Verdict.Reasons) != 1 {
		t.Errorf("verdict %+v; want failed: %s", sum.Verdict, want)
	}
	if sum.GPUs[0].Hung != "" || sum.GPUs[1].Hung == "" {
		t.Errorf("hung: gpu 0 %q, gpu 1 %q", sum.GPUs[0].Hung, sum.GPUs[1].Hung)
	}
	// GPU 0 went on being sampled.
	lines := readLines(t, path)
	var gpu0 int
	for _, l := range lines {
		if l.Kind == "sample" && l.GPU == 0 {
			gpu0++
		}
	}
	if gpu0 < 10 {
		t.Errorf("%d samples of gpu 0; want it sampled throughout", gpu0)
	}
}

// Through the monitor the engine uses, a blocking NVML call fails the
// step (Watch.Stop's failure) within the default call timeout instead of
// hanging the run.
func TestMonitorHungNVMLCallFailsTheStep(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100")
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	s.Device(0).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		<-block
		return 0, nvml.SUCCESS
	}
	m := NewMonitor(s, rec)
	w, err := m.Start(t.Context(), &pipeline.Step{ID: "burn", Kind: pipeline.KindBurnin, Interval: pipeline.MustDuration("50ms")}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, failure, err := w.Stop("")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*DefaultCallTimeout+5*time.Second {
		t.Errorf("Stop took %v", d)
	}
	if !strings.Contains(failure, "gpu 0 ("+rec.GPUs[0].UUID+"): NVML stopped answering") {
		t.Errorf("failure %q; want the hung GPU named", failure)
	}
}

// Corrected memory errors during a test or burn-in step (the memory
// sweep and the burn's stream look for them, and ECC hides them from the
// outputs) fail it: a rise of the corrected ECC count or of the rows
// remapped for correctable errors (NVML's GetRemappedRows corrRows, which
// telemetry dropped). Any other step notes them.
func TestTelemetryCorrectedErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inject func(*Simulated)
		want   string
	}{
		{"corrected ECC", func(s *Simulated) { s.InjectCorrectedECC(1, 3) }, "gpu 1: 3 corrected ECC error(s) during the step (volatile count 0 -> 3)"},
		{"correctable remapped rows", func(s *Simulated) { s.AddRemappedRowsCorrectable(1, 1) }, "gpu 1: 1 row(s) remapped for correctable memory errors during the step (0 -> 1)"},
	} {
		for _, fail := range []bool{true, false} {
			s := mustSimulate(t, "a100:2")
			var opts []TelemetryOption
			if fail {
				opts = append(opts, FailOnCorrectedErrors())
			}
			path := filepath.Join(t.TempDir(), "telemetry.jsonl")
			tel, err := StartTelemetry(t.Context(), s, path, 5*time.Millisecond, opts...)
			if err != nil {
				t.Fatal(err)
			}
			tc.inject(s)
			sum, err := tel.Stop()
			if err != nil {
				t.Fatal(err)
			}
			if fail && (sum.Verdict.Status != VerdictFailed || !hasLine(sum.Verdict.Reasons, tc.want, "a memory fault") || hasLine(sum.Notes, tc.want)) {
				t.Errorf("%s, failing: verdict %+v notes %q; want failed: %s", tc.name, sum.Verdict, sum.Notes, tc.want)
			}
			if !fail && (sum.Verdict.Status != VerdictPassed || !hasLine(sum.Notes, tc.want)) {
				t.Errorf("%s, noted: verdict %+v notes %q; want passed, noted: %s", tc.name, sum.Verdict, sum.Notes, tc.want)
			}
		}
	}
}

// The monitor fails test and burn-in steps on corrected errors and notes
// them for the others.
func TestMonitorCorrectedErrorsByKind(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]bool{pipeline.KindTest: true, pipeline.KindBurnin: true, pipeline.KindBenchmark: false, pipeline.KindExec: false} {
		s := mustSimulate(t, "a100")
		rec := &hardware.Record{}
		m := NewMonitor(s, rec)
		w, err := m.Start(t.Context(), &pipeline.Step{ID: "s", Kind: kind, Interval: pipeline.MustDuration("10ms")}, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		s.InjectCorrectedECC(0, 1)
		sum, failure, err := w.Stop("")
		if err != nil {
			t.Fatal(err)
		}
		if got := failure != ""; got != want || sum.(*Summary).CorrectedErrorsFail != want {
			t.Errorf("%s: failure %q; want failing %v", kind, failure, want)
		}
	}
}

// A GPU that reports no utilization has an unknown load: its PCIe link
// below its maximum generation (an idle GPU lowers it) is noted, not
// failed. Before, unknown utilization counted as loaded, and the idle
// link failed the step.
func TestTelemetryPCIeUnknownUtilization(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100")
	s.Device(0).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	s.Device(0).GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 1, nvml.SUCCESS }
	sum, _ := runTelemetry(t, s, nil)
	if sum.Verdict.Status != VerdictPassed || !hasLine(sum.Notes, "gpu 0: PCIe link at Gen1 (the GPU and system support Gen5), not judged: NVML reported no utilization") {
		t.Errorf("verdict %+v notes %q", sum.Verdict, sum.Notes)
	}
	if p := sum.GPUs[0].PCIe; p == nil || p.Loaded || !p.LoadUnknown {
		t.Errorf("pcie %+v", p)
	}
}
