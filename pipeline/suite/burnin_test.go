package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// sustainedStep is a burn-in of testdata/sustained.sh (a suite that
// declares a sustained run) with the given knobs.
func sustainedStep(t *testing.T, duration string, knobs ...string) *step.Context {
	t.Helper()
	p, err := filepath.Abs("testdata/sustained.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := newContext(t, pipeline.Step{ID: "burn", Kind: "burnin", Run: sh(`"$SUSTAINED" out.json`), Results: "out.json", Duration: pipeline.MustDuration(duration)})
	s.Env = append(s.Env, append([]string{"SUSTAINED=" + p}, knobs...)...)
	return s
}

// durationsAsked returns the GPUATTEST_DURATION of each invocation.
func durationsAsked(t *testing.T, s *step.Context) []float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.WorkDir, "duration.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, l := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			t.Fatalf("GPUATTEST_DURATION=%q", l)
		}
		out = append(out, v)
	}
	return out
}

// A suite that declares a sustained run is invoked once for the whole
// duration and judged on its own account: every repeat's consistency,
// duty cycle, in-process memory samples and loop error.
func TestBurninSustained(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		knobs  []string
		leak   string
		minDC  string
		status step.Status
		reason string
	}{
		{"passes", nil, "", "", step.Passed, "sustained run: 100 iterations"},
		{"gpu idles", []string{"SUS_BACKEND=cuda", "SUS_DUTY=0.5"}, "", "", step.Failed, "duty cycle 50.0% is below the 95.0% asked (cuda backend, cuda_events)"},
		{"gpu busy enough", []string{"SUS_BACKEND=cuda", "SUS_DUTY=0.97"}, "", "", step.Passed, "duty cycle 97.0% (cuda_events)"},
		{"cpu duty judged when asked", []string{"SUS_DUTY=0.5"}, "", "90%", step.Failed, "duty cycle 50.0% is below the 90.0% asked (cpu backend"},
		{"one repeat differs", []string{"SUS_BAD=1"}, "", "", step.Failed, "outputs differ from repeat 1: iteration 1: scale/n=1024/seed=1: 1 of 99 repeats differ from repeat 1 (first: repeat 7)"},
		{"rss grows", []string{"SUS_RSS_STEP=2097152"}, "1MiB", "", step.Failed, "host RSS rises by 2097152 bytes per memory sample (tolerance 1048576): leak"},
		{"rss noise", []string{"SUS_RSS_STEP=4096"}, "1MiB", "", step.Passed, "sustained run"},
		{"loop error", []string{"SUS_ERROR=cuEventSynchronize: an illegal memory access"}, "", "", step.Failed, "sustained run: cuEventSynchronize: an illegal memory access"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := sustainedStep(t, "500ms", tt.knobs...)
			s.Step.LeakTolerance = sizeOrZero(tt.leak)
			if tt.minDC != "" {
				s.Step.MinDutyCycle = pipeline.MustPercent(tt.minDC)
			}
			out, err := Burnin{}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			d := out.Details.(*BurninDetails)
			if out.Status != tt.status || !strings.Contains(out.Reason, tt.reason) {
				t.Fatalf("status %s reason %q, want %s containing %q\ndetails %+v", out.Status, out.Reason, tt.status, tt.reason, d)
			}
			if got := durationsAsked(t, s); len(got) != 1 || got[0] != 0.5 {
				t.Errorf("GPUATTEST_DURATION per invocation %v, want one invocation asked for 0.5 s", got)
			}
			if !d.Sustained || d.Invocations != 1 || d.Iterations != 100 || d.RepeatsChecked != 198 || d.Cases != 2 || d.OutputsChecked != 2 ||
				d.DutyCycle == nil || d.BusySeconds <= 0 {
				t.Errorf("details %+v", d)
			}
			// The first memory sample precedes the loop's allocations; the
			// trend is over the five after it.
			if d.HostRSS == nil || len(d.HostRSS.Series) != 5 || d.HostRSS.IntervalSeconds != 0.1 || d.HostRSS.SlopePerIteration == nil {
				t.Errorf("host RSS trend %+v", d.HostRSS)
			}
			if tt.status == step.Passed && (!d.Completed || len(d.Mismatches) != 0) {
				t.Errorf("passed but details %+v", d)
			}
			if tt.name == "one repeat differs" && len(d.Mismatches) != 1 {
				t.Errorf("mismatches %v", d.Mismatches)
			}
		})
	}
	t.Run("cpu duty reported only", func(t *testing.T) {
		t.Parallel()
		s := sustainedStep(t, "300ms", "SUS_DUTY=0.5")
		out, err := Burnin{}.Execute(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		d := out.Details.(*BurninDetails)
		if out.Status != step.Passed || d.MinDutyCycle != nil || *d.DutyCycle != 0.5 || !strings.Contains(strings.Join(d.Notes, "\n"), "duty cycle 50.0% on the cpu backend: reported, not judged") {
			t.Errorf("status %s %q, details %+v", out.Status, out.Reason, d)
		}
	})
}

// A sustained suite that stops short (its own --duration) is invoked again
// for the time left until the burn-in has run its duration.
func TestBurninSustainedShortRuns(t *testing.T) {
	t.Parallel()
	s := sustainedStep(t, "1s", "SUS_SLEEP=0.3")
	start := time.Now()
	out, err := Burnin{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	d := out.Details.(*BurninDetails)
	if out.Status != step.Passed || time.Since(start) < time.Second || d.Invocations < 2 || d.Iterations != 100*d.Invocations {
		t.Fatalf("status %s %q after %v, details %+v", out.Status, out.Reason, time.Since(start), d)
	}
	asked := durationsAsked(t, s)
	if len(asked) != d.Invocations || asked[0] != 1 {
		t.Fatalf("asked %v over %d invocations", asked, d.Invocations)
	}
	for i := 1; i < len(asked); i++ {
		if !(asked[i] < asked[i-1]) || asked[i] <= 0 {
			t.Errorf("invocation %d asked for %v s after %v: want the time left", i+1, asked[i], asked[i-1])
		}
	}
}

// A suite must not change its mind about sustaining the burn-in.
func TestBurninSustainedThenNot(t *testing.T) {
	t.Parallel()
	s := sustainedStep(t, "1s", "SUS_SLEEP=0.2")
	s.Step.Run = sh(`if [ -e once ]; then "$HARNESS" out.json; else touch once; "$SUSTAINED" out.json; fi`)
	out, err := Burnin{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != step.Failed || !strings.Contains(out.Reason, "iteration 2: the results of iteration 1 and 2 disagree on whether the suite ran sustained") {
		t.Errorf("status %s reason %q", out.Status, out.Reason)
	}
}

// A generic suite (it ignores GPUATTEST_DURATION) is still repeated; it is
// told the time left all the same.
func TestBurninGenericGetsDuration(t *testing.T) {
	t.Parallel()
	s := newContext(t, pipeline.Step{ID: "burn", Kind: "burnin", Run: sh(`echo "$GPUATTEST_DURATION" >> duration.log; "$HARNESS" out.json`), Results: "out.json", Duration: pipeline.MustDuration("300ms")})
	out, err := Burnin{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	d := out.Details.(*BurninDetails)
	if out.Status != step.Passed || d.Sustained || d.DutyCycle != nil || d.Invocations != d.Iterations || d.Iterations < 1 {
		t.Fatalf("status %s %q details %+v", out.Status, out.Reason, d)
	}
	if asked := durationsAsked(t, s); len(asked) != d.Iterations || asked[0] != 0.3 {
		t.Errorf("asked %v over %d iterations", asked, d.Iterations)
	}
}

// Telemetry of a gpu: true burn-in (here from go-nvml's mock servers,
// GPUATTEST_FAKE_GPU's source) fills the temperature range and throttle
// share, from the GPU the results name when the hardware record has it.
func TestBurninTelemetry(t *testing.T) {
	t.Parallel()
	sim, err := gpu.Simulate("h100:2")
	if err != nil {
		t.Fatal(err)
	}
	// GPU 1 runs hot at its power cap (loaded as it should be, not
	// throttled); GPU 0 draws little power but is held at its cap too.
	sim.Device(1).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 71, nvml.SUCCESS }
	sim.SetClockEventReasons(1, nvml.ClocksEventReasonSwPowerCap)
	sim.SetClockEventReasons(0, nvml.ClocksEventReasonSwPowerCap)
	sim.SetUtilization(0, 100)
	sim.SetUtilization(1, 100)
	rec, err := gpu.Collect(t.Context(), gpu.WithSource(sim))
	if err != nil {
		t.Fatal(err)
	}
	uuid1 := rec.GPUs[1].UUID
	tests := []struct {
		name       string
		uuid       string
		gpu        *int
		minC, maxC float64
		share      float64
		note       string
	}{
		{"the results' GPU", uuid1, ptrInt(1), 71, 71, 0, ""},
		{"no device named", "", nil, 32, 71, 0, "the results name no device"},
		{"a GPU the record lacks", "GPU-00000000-0000-0000-0000-000000000000", nil, 32, 71, 0, "the hardware record has no GPU"},
	}
	var mu sync.Mutex // the simulated source's telemetry, one step at a time
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			knobs := []string{"SUS_BACKEND=cuda"}
			if tt.uuid != "" {
				knobs = append(knobs, "SUS_UUID="+tt.uuid)
			}
			s := sustainedStep(t, "300ms", knobs...)
			s.Hardware = rec
			mu.Lock()
			defer mu.Unlock()
			tel, err := gpu.StartTelemetry(t.Context(), sim, filepath.Join(s.StepDir, gpu.TelemetryFile), 20*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Burnin{}.Execute(t.Context(), s)
			if _, err := tel.Stop(); err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			d := out.Details.(*BurninDetails)
			if out.Status != step.Passed || d.TempMinC == nil || d.TempMaxC == nil || d.ThrottleShare == nil || d.TelemetrySamples < 4 {
				t.Fatalf("status %s %q, details %+v", out.Status, out.Reason, d)
			}
			if *d.TempMinC < tt.minC || *d.TempMinC > tt.minC+3 || *d.TempMaxC != tt.maxC {
				t.Errorf("temperatures %v..%v, want %v..%v", *d.TempMinC, *d.TempMaxC, tt.minC, tt.maxC)
			}
			if (tt.gpu == nil) != (d.TelemetryGPU == nil) || (tt.gpu != nil && *d.TelemetryGPU != *tt.gpu) {
				t.Errorf("telemetry GPU %v, want %v", d.TelemetryGPU, tt.gpu)
			}
			if *d.ThrottleShare < tt.share-0.1 || *d.ThrottleShare > tt.share+0.1 {
				t.Errorf("throttle share %v, want %v", *d.ThrottleShare, tt.share)
			}
			if notes := strings.Join(d.Notes, "\n"); tt.note != "" && !strings.Contains(notes, tt.note) {
				t.Errorf("notes %q do not say %q", notes, tt.note)
			}
		})
	}
	if telemetryFile != gpu.TelemetryFile {
		t.Errorf("the burn-in reads %s, the engine writes %s", telemetryFile, gpu.TelemetryFile)
	}
}

// Without telemetry (no gpu: true, or the CPU tier) the fields stay unset.
func TestBurninNoTelemetry(t *testing.T) {
	t.Parallel()
	s := sustainedStep(t, "200ms")
	out, err := Burnin{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	d := out.Details.(*BurninDetails)
	if d.TempMinC != nil || d.TempMaxC != nil || d.ThrottleShare != nil || d.TelemetrySamples != 0 {
		t.Errorf("telemetry filled without telemetry: %+v", d)
	}
}

// The protocol end to end with the real harness on its CPU backend: one
// invocation runs the whole burn-in, its four cases and the host's FFMA
// burn case.
func TestBurninRealHarnessSustained(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "g++")
	bin := filepath.Join(t.TempDir(), "gpuattest-harness")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "g++", "-O2", "-std=c++17", "-pthread", "-o", bin, "../../kernels/harness/harness.cc", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("building the harness: %v\n%s", err, out)
	}
	s := newContext(t, pipeline.Step{ID: "burn", Kind: "burnin", Results: "out.json", Duration: pipeline.MustDuration("1500ms"), LeakTolerance: pipeline.MustSize("4MiB"),
		Run: pipeline.Command{Argv: []string{bin, "--backend", "cpu", "--n", "65536", "--gemm", "96", "--rows", "64", "--cols", "300", "--threads", "2", "--out", "out.json"}}})
	out, err := Burnin{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	d := out.Details.(*BurninDetails)
	if out.Status != step.Passed || !d.Sustained || d.Invocations != 1 || d.Cases != 5 || d.RepeatsChecked < 5 || d.Timing != TimingSteadyClock ||
		d.DutyCycle == nil || !(*d.DutyCycle > 0) || d.HostRSS == nil || len(d.HostRSS.Series) < 3 {
		t.Fatalf("status %s %q, details %+v", out.Status, out.Reason, d)
	}
}

// A burn-in of every GPU of the simulated 8-GPU node (go-nvml's dgxh100
// mock; the results list the eight devices) has one entry per GPU with
// its telemetry and power against its limit, and is judged on power: a
// GPU whose median power over the loop stays far below its limit without
// the power cap holding it was not loaded, and fails by index and UUID.
func TestBurninEveryGPUPower(t *testing.T) {
	t.Parallel()
	sim, err := gpu.Simulate("h100:8")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		mw := uint32(690_000)
		if i == 5 {
			mw = 300_000
		}
		sim.Device(i).GetPowerUsageFunc = func() (uint32, nvml.Return) { return mw, nvml.SUCCESS }
		sim.SetUtilization(i, 100)
	}
	rec, err := gpu.Collect(t.Context(), gpu.WithSource(sim))
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, g := range rec.GPUs {
		uuids = append(uuids, g.UUID)
	}
	burn := func(t *testing.T) *BurninDetails {
		s := sustainedStep(t, "300ms", "SUS_BACKEND=cuda", "SUS_DEVICES="+strings.Join(uuids, ","))
		s.Hardware = rec
		tel, err := gpu.StartTelemetry(t.Context(), sim, filepath.Join(s.StepDir, gpu.TelemetryFile), 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Burnin{}.Execute(t.Context(), s)
		if _, err := tel.Stop(); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		d := out.Details.(*BurninDetails)
		want := fmt.Sprintf("gpu 5 (%s): median power 300 W over the loop's", uuids[5])
		if loaded := d.GPUs[5].Loaded; loaded != nil && *loaded {
			if out.Status != step.Passed {
				t.Errorf("status %s %q; want passed", out.Status, out.Reason)
			}
		} else if out.Status != step.Failed || !strings.Contains(out.Reason, want) {
			t.Errorf("status %s %q; want failed: %s", out.Status, out.Reason, want)
		}
		return d
	}
	d := burn(t)
	if len(d.GPUs) != 8 {
		t.Fatalf("gpus %+v; want one per GPU", d.GPUs)
	}
	for i, g := range d.GPUs {
		if g.Index == nil || *g.Index != i || g.UUID != uuids[i] || g.Ordinal == nil || *g.Ordinal != i || g.DutyCycle == nil || g.Samples < 2 ||
			g.PowerLimitWatts == nil || *g.PowerLimitWatts != 700 || g.PowerMaxWatts == nil || g.Loaded == nil || *g.Loaded != (i != 5) {
			t.Errorf("gpu %d: %+v", i, g)
		}
	}
	// The same GPU held at its power cap was at its limit: it passes.
	sim.SetClockEventReasons(5, nvml.ClocksEventReasonSwPowerCap)
	if d := burn(t); d.GPUs[5].Loaded == nil || !*d.GPUs[5].Loaded || *d.GPUs[5].PowerCappedShare == 0 {
		t.Errorf("gpu 5 at its power cap: %+v", d.GPUs[5])
	}
}

// NVML's utilization cross-checks the harness's duty cycle: on the
// simulated 8-GPU node, GPU 2 whose kernels NVML sees running 40 % of
// the time fails by index and UUID although the harness reports it busy;
// the others, at 98 %, pass (SIMULATED: dgxh100 mock).
func TestBurninNVMLUtilization(t *testing.T) {
	t.Parallel()
	sim, err := gpu.Simulate("h100:8")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		sim.Device(i).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 690_000, nvml.SUCCESS }
		sim.SetUtilization(i, map[bool]uint32{true: 40, false: 98}[i == 2])
	}
	rec, err := gpu.Collect(t.Context(), gpu.WithSource(sim))
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, g := range rec.GPUs {
		uuids = append(uuids, g.UUID)
	}
	s := sustainedStep(t, "300ms", "SUS_BACKEND=cuda", "SUS_DEVICES="+strings.Join(uuids, ","))
	s.Hardware = rec
	tel, err := gpu.StartTelemetry(t.Context(), sim, filepath.Join(s.StepDir, gpu.TelemetryFile), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Burnin{}.Execute(t.Context(), s)
	if _, err := tel.Stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("gpu 2 (%s): NVML saw it busy a median 40 %% of the time", uuids[2])
	if out.Status != step.Failed || !strings.Contains(out.Reason, want) || strings.Count(out.Reason, "NVML saw it busy") != 1 {
		t.Errorf("status %s %q; want failed: %s", out.Status, out.Reason, want)
	}
	d := out.Details.(*BurninDetails)
	if g := d.GPUs[0]; g.Utilization == nil || *g.Utilization != 0.98 || g.UtilizationSamples < minUtilSamples {
		t.Errorf("gpu 0: %+v", g)
	}
}

// Leak detection reads the device's memory as NVML reports it: on the
// simulated 8-GPU node, GPU 6's used memory grows by 64 MiB per sample
// during the burn-in (another allocation the harness process does not
// see) and it fails by index and UUID; the others, flat, pass.
func TestBurninDeviceMemoryLeakFromNVML(t *testing.T) {
	t.Parallel()
	sim, err := gpu.Simulate("h100:8")
	if err != nil {
		t.Fatal(err)
	}
	var grown atomic.Int64
	base := sim.Device(6).GetMemoryInfo_v2Func
	sim.Device(6).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		m, ret := base()
		m.Used += uint64(grown.Add(64 << 20))
		return m, ret
	}
	rec, err := gpu.Collect(t.Context(), gpu.WithSource(sim))
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, g := range rec.GPUs {
		uuids = append(uuids, g.UUID)
	}
	s := sustainedStep(t, "400ms", "SUS_DEVICES="+strings.Join(uuids, ","))
	s.Hardware = rec
	tel, err := gpu.StartTelemetry(t.Context(), sim, filepath.Join(s.StepDir, gpu.TelemetryFile), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Burnin{}.Execute(t.Context(), s)
	if _, err := tel.Stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("gpu 6 (%s): NVML's used device memory rises by", uuids[6])
	if out.Status != step.Failed || !strings.Contains(out.Reason, want) || strings.Count(out.Reason, "used device memory rises") != 1 {
		t.Errorf("status %s %q; want failed: %s", out.Status, out.Reason, want)
	}
	d := out.Details.(*BurninDetails)
	if g := d.GPUs[0].DeviceMemory; g == nil || g.SlopePerIteration == nil || *g.SlopePerIteration != 0 || len(g.Series) < minTrendIterations {
		t.Errorf("gpu 0 device memory trend: %+v", g)
	}
}

// Simulated GPUs that report no load at all (the simulated gpu-check:
// the fake driver's kernels run on the host, the simulated NVML stays
// idle) are not judged on power or utilization, and the details say so;
// once a simulated GPU reports load (the tests above), they are.
func TestBurninSimulatedIdleNotJudged(t *testing.T) {
	t.Parallel()
	sim, err := gpu.Simulate("h100:2")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := gpu.Collect(t.Context(), gpu.WithSource(sim))
	if err != nil {
		t.Fatal(err)
	}
	s := sustainedStep(t, "300ms", "SUS_BACKEND=cuda", "SUS_DEVICES="+rec.GPUs[0].UUID+","+rec.GPUs[1].UUID)
	s.Hardware = rec
	tel, err := gpu.StartTelemetry(t.Context(), sim, filepath.Join(s.StepDir, gpu.TelemetryFile), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Burnin{}.Execute(t.Context(), s)
	if _, err := tel.Stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	d := out.Details.(*BurninDetails)
	if out.Status != step.Passed || d.GPUs[0].Loaded != nil || d.GPUs[0].Utilization != nil || !strings.Contains(strings.Join(d.Notes, "\n"), "SIMULATED GPUs report idle telemetry") {
		t.Errorf("status %s %q, gpu 0 %+v, notes %q", out.Status, out.Reason, d.GPUs[0], d.Notes)
	}
	// Nor is the duty cycle of the fake driver that stands for the cuda
	// backend there, unless the step asks for a minimum.
	s = sustainedStep(t, "200ms", "SUS_BACKEND=cuda", "SUS_DUTY=0.5")
	s.Hardware = rec
	out, err = Burnin{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	d = out.Details.(*BurninDetails)
	if out.Status != step.Passed || d.MinDutyCycle != nil || !strings.Contains(strings.Join(d.Notes, "\n"), "duty cycle 50.0% on SIMULATED GPUs (cuda backend): reported, not judged") {
		t.Errorf("simulated duty: status %s %q, notes %q", out.Status, out.Reason, d.Notes)
	}
}
