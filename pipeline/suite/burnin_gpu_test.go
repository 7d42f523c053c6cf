package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// The tests in this file are issue 31's, on the simulated node
// (go-nvml's dgxh100 mock): SIMULATED, they judge telemetry and results
// as a burn-in on a GPU would, and say nothing about a GPU.

// simNode is a simulated node of n H100s, its hardware record and UUIDs;
// real makes the record claim real GPUs (the rules a simulated record is
// spared), for the tests of those rules.
func simNode(t *testing.T, n int, real bool, setup func(*gpu.Simulated)) (*gpu.Simulated, *hardware.Record, []string) {
	t.Helper()
	sim, err := gpu.Simulate(fmt.Sprintf("h100:%d", n))
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(sim)
	}
	rec, err := gpu.Collect(t.Context(), gpu.WithSource(sim))
	if err != nil {
		t.Fatal(err)
	}
	if real {
		rec.Simulated = false
	}
	var uuids []string
	for _, g := range rec.GPUs {
		uuids = append(uuids, g.UUID)
	}
	return sim, rec, uuids
}

// burnOn runs a burn-in of testdata/sustained.sh with knobs on the node,
// with telemetry every 20 ms, and returns its outcome.
func burnOn(t *testing.T, sim *gpu.Simulated, rec *hardware.Record, duration string, edit func(*pipeline.Step), knobs ...string) (*step.Outcome, *BurninDetails) {
	t.Helper()
	s := sustainedStep(t, duration, append([]string{"SUS_WINDOW=1"}, knobs...)...)
	if edit != nil {
		edit(s.Step)
	}
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
	return out, out.Details.(*BurninDetails)
}

// The load rule judges the loop, not one sample: a GPU at 300 W of its
// 700 W limit whose clocks the power cap held in one sample only was
// not loaded, and fails. Before, one capped sample (or one peak) passed it.
func TestBurninOneCappedSampleIsNotLoad(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "loop-started")
	var inLoop atomic.Int64
	sim, rec, uuids := simNode(t, 2, false, func(sim *gpu.Simulated) {
		for i := range 2 {
			mw := map[bool]uint32{true: 300_000, false: 690_000}[i == 1]
			sim.Device(i).GetPowerUsageFunc = func() (uint32, nvml.Return) { return mw, nvml.SUCCESS }
			sim.SetUtilization(i, 100)
		}
		// GPU 1's reasons show the power cap in one reading, its third
		// since the loop's window opened.
		sim.Device(1).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
			if _, err := os.Stat(mark); err == nil && inLoop.Add(1) == 3 {
				return nvml.ClocksEventReasonSwPowerCap, nvml.SUCCESS
			}
			return 0, nvml.SUCCESS
		}
		sim.Device(1).GetCurrentClocksThrottleReasonsFunc = sim.Device(1).GetCurrentClocksEventReasonsFunc
	})
	out, d := burnOn(t, sim, rec, "400ms", nil, "SUS_BACKEND=cuda", "SUS_DEVICES="+strings.Join(uuids, ","), "SUS_MARK_IN="+mark)
	want := fmt.Sprintf("gpu 1 (%s): median power 300 W over the loop's", uuids[1])
	if out.Status != step.Failed || !strings.Contains(out.Reason, want) || strings.Count(out.Reason, "did not load the GPU") != 1 {
		t.Errorf("status %s %q; want failed: %s", out.Status, out.Reason, want)
	}
	g := d.GPUs[1]
	if g.PowerCappedShare == nil || *g.PowerCappedShare == 0 || *g.PowerCappedShare >= MinCappedShare || g.PowerMedianWatts == nil || *g.PowerMedianWatts != 300 {
		t.Errorf("gpu 1: capped share %v, median %v; want one capped sample and a 300 W median", deref(g.PowerCappedShare), deref(g.PowerMedianWatts))
	}
	if g := d.GPUs[0]; g.Loaded == nil || !*g.Loaded {
		t.Errorf("gpu 0 at 690 W: %+v; want loaded", g)
	}
}

// Power, NVML utilization and the device memory trend are judged over
// the loop the results' window names, not the setup before it: GPUs
// idle (5 % busy) and filling memory while the suite sets up, then busy
// and flat in the loop, pass. Without a window every sample is judged,
// the setup's too, and the same GPUs fail, as they did before.
func TestBurninJudgesTheLoopNotTheSetup(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "loop-started")
	looping := func() bool { _, err := os.Stat(mark); return err == nil }
	var grown atomic.Int64
	sim, rec, uuids := simNode(t, 2, false, func(sim *gpu.Simulated) {
		for i := range 2 {
			sim.Device(i).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 690_000, nvml.SUCCESS }
			sim.Device(i).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
				if looping() {
					return nvml.Utilization{Gpu: 99}, nvml.SUCCESS
				}
				return nvml.Utilization{Gpu: 5}, nvml.SUCCESS
			}
			base := sim.Device(i).GetMemoryInfo_v2Func
			sim.Device(i).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
				m, ret := base()
				if !looping() {
					m.Used += uint64(grown.Add(64 << 20))
				} else {
					m.Used += uint64(grown.Load())
				}
				return m, ret
			}
		}
	})
	knobs := []string{"SUS_BACKEND=cuda", "SUS_DEVICES=" + strings.Join(uuids, ","), "SUS_SETUP=0.6", "SUS_MARK=" + mark}
	out, d := burnOn(t, sim, rec, "300ms", nil, knobs...)
	if out.Status != step.Passed {
		t.Errorf("status %s %q; want passed (the setup is not judged)", out.Status, out.Reason)
	}
	if g := d.GPUs[0]; g.Utilization == nil || *g.Utilization != 0.99 || g.LoopSamples >= g.Samples || g.LoopSamples < 5 {
		t.Errorf("gpu 0: utilization %v, %d of %d samples in the loop", g.Utilization, g.LoopSamples, g.Samples)
	}
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	out, d = burnOn(t, sim, rec, "300ms", nil, append(knobs, "SUS_NOWINDOW=1")...)
	if out.Status != step.Failed || !strings.Contains(out.Reason, "NVML saw it busy a median") || !strings.Contains(out.Reason, "used device memory rises") ||
		!strings.Contains(strings.Join(d.Notes, "\n"), "the results give no loop window") {
		t.Errorf("no window: status %s %q, notes %q; want the setup judged too, and failing", out.Status, out.Reason, d.Notes)
	}
}

// A GPU whose power or utilization NVML does not report (some VMs, vGPU,
// MIG) is not silently skipped: on a real GPU the burn-in fails, naming
// it, unless the step sets allowMissingReadings; on a simulated one it
// is a note. Before, the rules were skipped without a word.
func TestBurninMissingReadings(t *testing.T) {
	t.Parallel()
	noPower := func(sim *gpu.Simulated) {
		for i := range 2 {
			sim.Device(i).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			sim.SetUtilization(i, 100)
		}
	}
	tests := []struct {
		name   string
		real   bool
		allow  bool
		status step.Status
		want   string
	}{
		{"real GPU", true, false, step.Failed, "no power readings over the loop: its load is not judged; hint:"},
		{"real GPU, allowed", true, true, step.Passed, "no power readings over the loop: its load is not judged (allowMissingReadings)"},
		{"simulated GPU", false, false, step.Passed, "no power readings over the loop: its load is not judged (SIMULATED)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, rec, uuids := simNode(t, 2, tt.real, noPower)
			out, d := burnOn(t, sim, rec, "300ms", func(s *pipeline.Step) { s.AllowMissingReadings = tt.allow }, "SUS_BACKEND=cuda", "SUS_DEVICES="+strings.Join(uuids, ","))
			text := out.Reason + "\n" + strings.Join(d.Notes, "\n")
			if out.Status != tt.status || !strings.Contains(text, fmt.Sprintf("gpu 1 (%s): %s", uuids[1], tt.want)) {
				t.Errorf("status %s, reason and notes:\n%s\nwant %s and %q", out.Status, text, tt.status, tt.want)
			}
			if d.GPUs[0].Loaded != nil {
				t.Errorf("gpu 0 judged loaded %v without power readings", *d.GPUs[0].Loaded)
			}
		})
	}
}

// The burn's achieved work is judged per GPU: against the median of the
// node's GPUs of its model (one at half the rate fails), and against
// itself over time (one whose last window runs 30 % slower than its
// first fails). Before, a slow GPU passed: the burn is calibrated per
// GPU, and nothing compared what it achieved.
func TestBurninThroughputRules(t *testing.T) {
	t.Parallel()
	sim, rec, uuids := simNode(t, 4, false, func(sim *gpu.Simulated) {
		for i := range 4 {
			sim.Device(i).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 690_000, nvml.SUCCESS }
			sim.SetUtilization(i, 100)
		}
	})
	devs := "SUS_DEVICES=" + strings.Join(uuids, ",")
	out, d := burnOn(t, sim, rec, "600ms", nil, "SUS_BACKEND=cuda", devs, "SUS_BURN=500,510,250,505")
	want := fmt.Sprintf("gpu 2 (%s): the burn ran at 250 TFLOP/s, 50 %% of the median of the node's 4 NVIDIA H100 80GB HBM3 GPUs (502.5 TFLOP/s)", uuids[2])
	if out.Status != step.Failed || !strings.Contains(out.Reason, want) || strings.Count(out.Reason, "the burn ran at") != 1 {
		t.Errorf("status %s %q; want failed: %s", out.Status, out.Reason, want)
	}
	if g := d.GPUs[1]; g.BurnTFLOPS == nil || !near(*g.BurnTFLOPS, 510) || g.BurnNodeMedianTFLOPS == nil || !near(*g.BurnNodeMedianTFLOPS, 502.5) || g.BurnKernel != "hmma" {
		t.Errorf("gpu 1: %+v", g)
	}
	out, d = burnOn(t, sim, rec, "600ms", nil, "SUS_BACKEND=cuda", devs, "SUS_BURN=500,500,500,500", "SUS_SLOW=3:0.7")
	want = fmt.Sprintf("gpu 3 (%s): the burn's last 0 s ran at 350 TFLOP/s, 70 %% of its first 0 s (500 TFLOP/s)", uuids[3])
	if out.Status != step.Failed || !strings.Contains(out.Reason, want) || strings.Count(out.Reason, "slowed down") != 1 {
		t.Errorf("status %s %q; want failed: %s", out.Status, out.Reason, want)
	}
	if g := d.GPUs[0]; g.BurnFirstTFLOPS == nil || g.BurnLastTFLOPS == nil || !near(*g.BurnFirstTFLOPS, 500) || !near(*g.BurnLastTFLOPS, 500) {
		t.Errorf("gpu 0: first %v last %v", g.BurnFirstTFLOPS, g.BurnLastTFLOPS)
	}
}

// Each GPU is judged against its model's floors (pipeline/floors), and
// the details say which were applied: on a node recorded as real H100
// SXMs, a tensor-core burn at 300 TFLOP/s is under the H100 SXM floor
// (396 TFLOP/s, 40 % of the datasheet's 989) and fails; at 500 it
// passes, and the power floor (85 % of the enforced limit) was applied
// too. On a simulated node the floors are named but not judged. A GPU
// of a model the table lacks says "no floor: not judged".
func TestBurninFloors(t *testing.T) {
	t.Parallel()
	loaded := func(sim *gpu.Simulated) {
		for i := range 2 {
			sim.Device(i).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 690_000, nvml.SUCCESS }
			sim.SetUtilization(i, 100)
		}
	}
	sim, rec, uuids := simNode(t, 2, true, loaded)
	devs := "SUS_DEVICES=" + strings.Join(uuids, ",")
	out, d := burnOn(t, sim, rec, "300ms", nil, "SUS_BACKEND=cuda", devs, "SUS_BURN=500,300")
	want := fmt.Sprintf("gpu 1 (%s): the tensor-core burn ran at 300 TFLOP/s, under the H100 SXM floor of 396 TFLOP/s (40 %% of its 989 TFLOP/s peak, NVIDIA H100 Tensor Core GPU datasheet)", uuids[1])
	if out.Status != step.Failed || !strings.Contains(out.Reason, want) {
		t.Errorf("status %s %q; want failed: %s", out.Status, out.Reason, want)
	}
	got := map[string]attest.AppliedFloor{}
	for _, f := range d.Floors {
		got[f.GPU+" "+f.Metric] = f
	}
	if f := got[uuids[0]+" tensor_fp16"]; f.Model != "H100 SXM" || f.Min != 396e12 || f.Peak != 989.4e12 || f.Unit != "flop/s" || f.Verdict != attest.FloorPassed ||
		f.Measured == nil || !near(*f.Measured, 500e12) || f.Source != "NVIDIA H100 Tensor Core GPU datasheet" || !strings.HasPrefix(f.SourceURL, "https://") || f.Step != "burn" {
		t.Errorf("gpu 0 tensor floor %+v", f)
	}
	if f := got[uuids[1]+" tensor_fp16"]; f.Verdict != attest.FloorFailed {
		t.Errorf("gpu 1 tensor floor %+v; want failed", f)
	}
	if f := got[uuids[0]+" power_share"]; f.Model != "H100 SXM" || f.Min != 0.85 || f.Peak != 1 || f.Verdict != attest.FloorPassed || f.Measured == nil || *f.Measured < 0.98 {
		t.Errorf("gpu 0 power floor %+v", f)
	}

	// Simulated: named, not judged.
	sim, rec, uuids = simNode(t, 2, false, loaded)
	out, d = burnOn(t, sim, rec, "300ms", nil, "SUS_BACKEND=cuda", "SUS_DEVICES="+strings.Join(uuids, ","), "SUS_BURN=2,2")
	if out.Status != step.Passed {
		t.Errorf("simulated: status %s %q", out.Status, out.Reason)
	}
	for _, f := range d.Floors {
		if f.Metric == "tensor_fp16" && (f.Model != "H100 SXM" || f.Verdict != attest.FloorNotJudged || !strings.Contains(f.Note, "SIMULATED")) {
			t.Errorf("simulated tensor floor %+v", f)
		}
	}

	// A model without floors.
	sim, rec, uuids = simNode(t, 2, true, loaded)
	for i := range rec.GPUs {
		rec.GPUs[i].Name = "NVIDIA Hypothetical X1"
	}
	out, d = burnOn(t, sim, rec, "300ms", nil, "SUS_BACKEND=cuda", "SUS_DEVICES="+strings.Join(uuids, ","), "SUS_BURN=500,500")
	if out.Status != step.Passed || len(d.Floors) != 4 {
		t.Fatalf("unknown model: status %s %q, floors %+v", out.Status, out.Reason, d.Floors)
	}
	for _, f := range d.Floors {
		if f.Model != "" || f.Verdict != attest.FloorNotJudged || !strings.HasPrefix(f.Note, "no floor: not judged") {
			t.Errorf("unknown model's floor %+v; want %q", f, "no floor: not judged")
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// near reports whether a and b agree within a millionth.
func near(a, b float64) bool { return a > b*(1-1e-6) && a < b*(1+1e-6) }

// On the simulated 8-GPU node the fake driver runs GPU 3 at half clock
// (FAKE_CUDA_CLOCK=0.5@3): the real harness's burn, calibrated per GPU,
// passes on every GPU by its own account, and gpuattest fails GPU 3 on
// its throughput against the node's other H100s, by UUID. SIMULATED:
// the harness runs on the fake driver, its kernels on the host.
func TestBurninHalfClockGPU(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "g++")
	dir := t.TempDir()
	bin, lib := filepath.Join(dir, "gpuattest-harness"), filepath.Join(dir, "lib")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	if err := os.MkdirAll(filepath.Join(lib, "fatbins"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"-O2", "-std=c++17", "-pthread", "-o", bin, "../../kernels/harness/harness.cc", "-ldl"},
		{"-O2", "-std=c++17", "-shared", "-fPIC", "-o", filepath.Join(lib, "libcuda.so.1"), "../../kernels/testdata/fakecuda/fakecuda.cc"},
	} {
		if out, err := exec.CommandContext(ctx, "g++", c...).CombinedOutput(); err != nil {
			t.Fatalf("g++ %v: %v\n%s", c, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(lib, "fatbins", "vector_add.fatbin"), []byte("placeholder"), 0o644); err != nil {
		t.Fatal(err)
	}
	sim, rec, uuids := simNode(t, 8, false, nil)
	model := rec.GPUs[0].Name
	s := newContext(t, pipeline.Step{ID: "burnin", Kind: "burnin", Results: "out.json", Duration: pipeline.MustDuration("2s"),
		Run: pipeline.Command{Argv: []string{bin, "--backend", "cuda", "--fatbin-dir", filepath.Join(lib, "fatbins"), "--devices", "all", "--kernels", "vector_add",
			"--n", "65536", "--warmup", "0", "--burn-ms", "5", "--out", "out.json"}}})
	s.Env = append(s.Env, "LD_LIBRARY_PATH="+lib, "FAKE_CUDA_DEVICES=8", "FAKE_CUDA_UUIDS="+strings.Join(uuids, ","), "FAKE_CUDA_NAME="+model,
		"FAKE_CUDA_CLOCK=0.5@3")
	s.Hardware = rec
	tel, err := gpu.StartTelemetry(t.Context(), sim, filepath.Join(s.StepDir, gpu.TelemetryFile), 100*time.Millisecond)
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
	want := fmt.Sprintf("gpu 3 (%s): the burn ran at ", uuids[3])
	if out.Status != step.Failed || !strings.Contains(out.Reason, want) || !strings.Contains(out.Reason, "of the median of the node's 8") || strings.Count(out.Reason, "the burn ran at") != 1 {
		t.Errorf("status %s %q; want failed: %s... of the median of the node's 8", out.Status, out.Reason, want)
	}
	for i, g := range d.GPUs {
		if g.BurnTFLOPS == nil || g.BurnNodeMedianTFLOPS == nil {
			t.Errorf("gpu %d: no burn throughput: %+v", i, g)
			continue
		}
		share := *g.BurnTFLOPS / *g.BurnNodeMedianTFLOPS
		if (i == 3) != (share < 0.6) {
			t.Errorf("gpu %d: %.3g TFLOP/s, %.2f of the median", i, *g.BurnTFLOPS, share)
		}
	}
}

// The bandwidth case (the harness's --membw) is judged against the
// memory-bandwidth floor of its GPU's model: on a GPU recorded as a real
// H100 SXM a copy at 2147 GB/s is under the floor (2345 GB/s, 70 % of
// 3.35 TB/s) and fails the benchmark; at 2684 GB/s it passes; on a
// simulated GPU the floor is named and not judged; on a model without
// floors, "no floor: not judged".
func TestBenchmarkBandwidthFloor(t *testing.T) {
	t.Parallel()
	_, real, uuids := simNode(t, 1, true, nil)
	_, simulated, _ := simNode(t, 1, false, nil)
	unknown := *real
	unknown.GPUs = append([]hardware.GPU(nil), real.GPUs...)
	unknown.GPUs[0].Name = "NVIDIA Hypothetical X1"
	tests := []struct {
		name    string
		rec     *hardware.Record
		ns      string
		status  step.Status
		verdict string
		want    string
	}{
		{"under the floor", real, "1000000", step.Failed, attest.FloorFailed, "device-local copy bandwidth, under the H100 SXM floor of 2345 GB/s"},
		{"above the floor", real, "800000", step.Passed, attest.FloorPassed, ""},
		{"simulated", simulated, "1000000", step.Passed, attest.FloorNotJudged, ""},
		{"unknown model", &unknown, "1000000", step.Passed, attest.FloorNotJudged, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			results := `{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cuda","device":"NVIDIA H100 80GB HBM3","devices":[{"ordinal":0,"uuid":"` + uuids[0] + `","cases":1,"passed":1}],` +
				`"cases":[{"name":"membw/bytes=1073741824/gpu=0","kernel":"membw","status":"passed","message":"","samples_ns":[` + tt.ns + `,` + tt.ns + `,` + tt.ns + `],"flops":0,"bytes":2147483648,` +
				`"config":{"floor_metric":"memory_bandwidth","device_uuid":"` + uuids[0] + `","device_ordinal":"0"}}]}`
			s := newContext(t, pipeline.Step{ID: "bench", Kind: "benchmark", Results: "out.json", Repeats: pipeline.Repeats{N: 3},
				Run: sh(`printf '%s\n' '` + results + `' > out.json`)})
			s.Hardware = tt.rec
			out, err := Benchmark{}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			d := out.Details.(*BenchmarkDetails)
			if out.Status != tt.status || !strings.Contains(out.Reason, tt.want) || len(d.Floors) != 1 || d.Floors[0].Verdict != tt.verdict || d.Floors[0].GPU != uuids[0] ||
				d.Floors[0].Metric != "memory_bandwidth" || d.Floors[0].Measured == nil {
				t.Fatalf("status %s %q, floors %+v; want %s, %q, verdict %s", out.Status, out.Reason, d.Floors, tt.status, tt.want, tt.verdict)
			}
			if f := d.Floors[0]; tt.rec != &unknown && (f.Model != "H100 SXM" || f.Min != 2.345e12 || f.Unit != "bytes/s") {
				t.Errorf("floor %+v", f)
			}
		})
	}
}
