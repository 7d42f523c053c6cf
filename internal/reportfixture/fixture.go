// Package reportfixture writes simulated run directories for the report's
// tests and its benchmark: a run with a cached build, a test, a benchmark
// against a same-run reference (one case SLOWER), a GPU burn-in with its
// memory series and an hour or so of telemetry with throttling, an Xid
// and an ECC event, all of it made up and marked simulated.
package reportfixture

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// Options shape a fixture run.
type Options struct {
	// Samples is the number of samples per side of each benchmark case
	// (default 60).
	Samples int
	// Telemetry is the length of the burn-in's telemetry at one sample a
	// second per GPU (default 2 minutes).
	Telemetry time.Duration
	// GPUs is the number of simulated GPUs (default 1).
	GPUs int
	// Text, when set, is put into every string a run or its results can
	// carry (step reasons, case names, device names, notes, ...): the
	// report must show it as text.
	Text string
}

// Write writes a run directory into dir and returns it.
func Write(dir string, o Options) error {
	if o.Samples == 0 {
		o.Samples = 60
	}
	if o.Telemetry == 0 {
		o.Telemetry = 2 * time.Minute
	}
	if o.GPUs == 0 {
		o.GPUs = 1
	}
	f := &fixture{dir: dir, o: o, x: o.Text, rng: rand.New(rand.NewPCG(1, 2)), t0: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	hw, err := f.hardware()
	if err != nil {
		return err
	}
	f.buildSteps()
	bd, err := f.benchmark()
	if err != nil {
		return err
	}
	tel := f.burnin()
	if err := f.telemetry(tel); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "steps", "bench", "benchmark.json"), bd, true); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "hardware.json"), hw, false); err != nil {
		return err
	}
	fin := f.t0.Add(time.Duration((burnStart + f.o.Telemetry.Seconds()) * float64(time.Second)))
	rec := &engine.Record{Schema: engine.RecordSchema, Pipeline: engine.PipelineRef{Name: "release" + f.x, Path: "pipelines/release.yaml", Digest: "sha256:" + hexOf('9')},
		Version: "v0.9.0", State: runtypes.Failed, Reason: "steps not passed: bench" + f.x, StartedAt: f.t0, FinishedAt: &fin,
		Hardware: &engine.HardwareRef{Digest: hw.Digest, Simulated: true, File: "hardware.json"}, Steps: f.steps, Attempts: []engine.Attempt{{StartedAt: f.t0, FinishedAt: &fin}}}
	return writeJSON(filepath.Join(dir, "run.json"), rec, true)
}

// burnStart is when the fixture's burn-in starts, in seconds of the run.
const burnStart = 80.0

// fixture is a run being written.
type fixture struct {
	dir   string
	o     Options
	x     string // Options.Text
	rng   *rand.Rand
	t0    time.Time
	steps []*engine.StepRecord
}

func hexOf(c byte) string { return strings.Repeat(string(c), 64) }

// at is sec seconds into the run.
func (f *fixture) at(sec float64) *time.Time {
	t := f.t0.Add(time.Duration(sec * float64(time.Second)))
	return &t
}

// add records a step with its details.
func (f *fixture) add(sr *engine.StepRecord, details any) {
	if details != nil {
		raw, _ := json.Marshal(details)
		sr.Details = raw
	}
	if sr.StartedAt != nil && sr.FinishedAt != nil {
		sr.DurationMS = sr.FinishedAt.Sub(*sr.StartedAt).Milliseconds()
	}
	sr.Runner, sr.Runs = &runner.Info{Name: "host", Isolation: "none"}, 1
	f.steps = append(f.steps, sr)
}

// hardware is a sealed record of o.GPUs simulated H100s.
func (f *fixture) hardware() (*hardware.Record, error) {
	u64 := func(v uint64) *uint64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	hw := &hardware.Record{Simulated: true,
		Host:          hardware.Host{CPUModel: "Simulated CPU" + f.x, CPUCores: 32, MemoryBytes: 256 << 30, Kernel: "6.1.0", OS: "Debian GNU/Linux 12 (bookworm)"},
		DriverVersion: "550.54.15", CUDADriverVersion: "12.4", NVMLVersion: "12.550.54.15"}
	for g := 0; g < f.o.GPUs; g++ {
		sm, mem := uint32(1980), uint32(2619)
		gen, width := 5, 16
		hw.GPUs = append(hw.GPUs, hardware.GPU{Index: g, Name: "NVIDIA H100 80GB HBM3" + f.x, UUID: fmt.Sprintf("GPU-%08d-sim", g), PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+g),
			ComputeCapability: "9.0", MemoryTotalBytes: u64(80 << 30), ECCEnabled: b(true), MIGEnabled: b(false), PowerLimitWatts: f64(700),
			MaxClocksMHz: &hardware.Clocks{SM: &sm, Mem: &mem}, PCIe: &hardware.PCIe{Gen: &gen, Width: &width}, VBIOS: "96.00.74.00.0D"})
	}
	return hw, hw.Seal()
}

// buildSteps records a cached cuda-build of two fatbins for sm_80 and
// sm_90, the harness build and a passing test.
func (f *fixture) buildSteps() {
	exit0 := 0
	build := &cuda.BuildDetails{Targets: []string{"sm_80", "sm_90"}, Output: "fatbin", PTX: true,
		Reproducibility: &cuda.ReproReport{Reproducible: true, FirstDir: "a", SecondDir: "b", Identical: []string{"build/vector_add.fatbin"}}}
	for i, name := range []string{"vector_add", "sgemm" + f.x} {
		build.Artifacts = append(build.Artifacts, &runtypes.Inspection{Path: "build/" + name + ".fatbin", SHA256: hexOf("ab"[i]), Size: 9000 + int64(i)*1000,
			SASS: []string{"sm_80", "sm_90"}, PTX: []string{"compute_90"},
			Cubins: []runtypes.Cubin{{Name: name + ".sm_80.cubin", Arch: "sm_80", SHA256: hexOf("cd"[i])}, {Name: name + ".sm_90.cubin", Arch: "sm_90", SHA256: hexOf("ef"[i])}}})
	}
	f.add(&engine.StepRecord{ID: "kernels", Kind: "cuda-build", State: runtypes.Passed, StartedAt: f.at(0), FinishedAt: f.at(0.4), Cache: "hit", ExitCode: &exit0}, build)
	f.add(&engine.StepRecord{ID: "harness", Kind: "exec", State: runtypes.Passed, StartedAt: f.at(0), FinishedAt: f.at(6), Cache: "miss", ExitCode: &exit0}, &engine.ExecDetails{})
	f.add(&engine.StepRecord{ID: "test", Kind: "test", State: runtypes.Passed, StartedAt: f.at(6), FinishedAt: f.at(9), ExitCode: &exit0},
		&suite.TestDetails{Results: "build/results.json", Format: "gpuattest", Backend: "cuda", Device: "NVIDIA H100 80GB HBM3" + f.x, Counts: suite.Counts{Total: 12, Passed: 12}})
}

// benchmark records a benchmark against a same-run reference: three
// cases, the last one 8 % slower, with a few slow outliers. It returns
// the benchmark.json content (with samples).
func (f *fixture) benchmark() (*suite.BenchmarkDetails, error) {
	gate := stats.Gate{Threshold: 0.03, Alpha: 0.01}
	bd := &suite.BenchmarkDetails{Schema: suite.BenchmarkSchemaID, Backend: "cuda", Device: "NVIDIA H100 80GB HBM3" + f.x, Warmup: ptrInt(5), Repeats: "15",
		Reference: &suite.ReferenceResult{Run: "build/ref/harness", Results: "build/ref.json", Backend: "cuda", Rounds: 30, Order: "RCCR CRRC",
			Report: &suite.Report{Gate: gate, Counts: map[stats.Verdict]int{}}}}
	for i, c := range []struct {
		name  string
		ns    float64
		shift float64
	}{{"vector_add/n=16777216", 180e3, 0}, {"sgemm/m=4096/n=4096/k=4096" + f.x, 2.1e6, -0.05}, {"softmax/rows=8192/cols=8192", 650e3, 0.08}} {
		cand, ref := f.samples(c.ns*(1+c.shift)), f.samples(c.ns)
		cs, _ := stats.Summarize(cand)
		rs, _ := stats.Summarize(ref)
		bd.Cases = append(bd.Cases, suite.BenchmarkCase{Name: c.name, Kernel: strings.Split(c.name, "/")[0], Status: "passed", Stats: &cs, SamplesNS: cand})
		bd.Reference.Cases = append(bd.Reference.Cases, suite.BenchmarkCase{Name: c.name, Status: "passed", Stats: &rs, SamplesNS: ref})
		cmp, err := stats.Compare(ref, cand, gate)
		if err != nil {
			return nil, err
		}
		cmp.Method = stats.MethodPaired
		if i == 2 {
			cmp.Reason = "slower by 8.0 % " + f.x
		}
		bd.Reference.Report.Cases = append(bd.Reference.Report.Cases, suite.CaseComparison{Name: c.name, Comparison: cmp})
		bd.Reference.Report.Counts[cmp.Verdict]++
		bd.Reference.Report.Failed = bd.Reference.Report.Failed || cmp.Verdict == stats.Slower
	}
	state, reason := runtypes.Passed, ""
	if bd.Reference.Report.Failed {
		state, reason = runtypes.Failed, "benchmark softmax/rows=8192/cols=8192 SLOWER than the reference: +8.0 %"+f.x
	}
	exit0 := 0
	f.add(&engine.StepRecord{ID: "bench", Kind: "benchmark", State: state, Reason: reason, StartedAt: f.at(9), FinishedAt: f.at(burnStart), ExitCode: &exit0}, withoutSamples(bd))
	return bd, nil
}

// samples draws o.Samples timings around base, 2 % of them slow.
func (f *fixture) samples(base float64) []float64 {
	xs := make([]float64, f.o.Samples)
	for j := range xs {
		xs[j] = base * math.Exp(0.02*f.rng.NormFloat64())
		if f.rng.IntN(50) == 0 {
			xs[j] *= 1.5 + f.rng.Float64()
		}
	}
	return xs
}

// withoutSamples is bd as run.json holds it: no schema, no raw samples.
func withoutSamples(bd *suite.BenchmarkDetails) *suite.BenchmarkDetails {
	slim := *bd
	slim.Schema = ""
	slim.Cases = nil
	for _, c := range bd.Cases {
		c.SamplesNS = nil
		slim.Cases = append(slim.Cases, c)
	}
	ref := *bd.Reference
	ref.Cases = nil
	for _, c := range bd.Reference.Cases {
		c.SamplesNS = nil
		ref.Cases = append(ref.Cases, c)
	}
	slim.Reference = &ref
	return &slim
}

// burnin records a GPU burn-in and a skipped step after it, and returns
// the burn-in's telemetry summary for telemetry to fill.
func (f *fixture) burnin() *gpu.Summary {
	secs := f.o.Telemetry.Seconds()
	iters := max(10, int(secs/4))
	bur := &suite.BurninDetails{Requested: f.o.Telemetry.String(), Elapsed: f.o.Telemetry.String(), Completed: true, Iterations: iters, Cases: 4, OutputsChecked: 4,
		LeakToleranceBytes: 1 << 20, Notes: []string{"note" + f.x}}
	var rss, dev []int64
	for i := 0; i < iters; i++ {
		bur.IterationSeconds = append(bur.IterationSeconds, 4+0.1*f.rng.NormFloat64())
		rss = append(rss, 900<<20+int64(f.rng.IntN(4<<20)))
		dev = append(dev, 20<<30+int64(i)*(64<<10))
	}
	bur.HostRSS = trend(rss)
	bur.DeviceMemory = trend(dev)
	tmin, tmax, share := 35.0, 83.0, 0.04
	bur.TempMinC, bur.TempMaxC, bur.ThrottleShare = &tmin, &tmax, &share
	exit0 := 0
	f.add(&engine.StepRecord{ID: "burnin", Kind: "burnin", State: runtypes.Passed, StartedAt: f.at(burnStart), FinishedAt: f.at(burnStart + secs), ExitCode: &exit0}, bur)
	f.add(&engine.StepRecord{ID: "publish", Kind: "exec", State: runtypes.Skipped, Reason: "needs bench, which did not pass" + f.x}, nil)
	return &gpu.Summary{Simulated: true, IntervalSeconds: 1, DurationSeconds: secs, Verdict: gpu.Verdict{Status: gpu.VerdictPassed}}
}

// telemetry writes the burn-in's telemetry.jsonl (temperature rising to
// a plateau, power at the cap in one window, as a loaded GPU should be,
// an HW thermal slowdown in another, an Xid and an ECC event) and records its summary tel on the burn-in.
func (f *fixture) telemetry(tel *gpu.Summary) error {
	var tl strings.Builder
	enc := json.NewEncoder(&tl)
	n := int(f.o.Telemetry.Seconds())
	when := func(s int) time.Time { return *f.at(burnStart + float64(s)) }
	for s := 0; s < n; s++ {
		for g := 0; g < f.o.GPUs; g++ {
			if err := enc.Encode(f.sample(tel, s, n, g, when(s))); err != nil {
				return err
			}
		}
		if s == n/2 {
			xid := uint64(94)
			if err := enc.Encode(runtypes.TelemetryLine{Time: when(s), Kind: "xid", Xid: &xid, Simulated: true}); err != nil {
				return err
			}
			tel.XidEvents = append(tel.XidEvents, gpu.XidEvent{Time: when(s), Xid: 94, Description: "contained ECC error" + f.x})
		}
		if s == 3*n/4 {
			if err := enc.Encode(runtypes.TelemetryLine{Time: when(s), Kind: "ecc_dbe", Simulated: true}); err != nil {
				return err
			}
		}
	}
	if tel.Samples > 0 {
		tel.ThrottleShare = float64(tel.ThrottledSamples) / float64(tel.Samples)
	}
	t80, t35, pmax := uint32(83), uint32(35), 700.0
	tel.TemperatureMaxC, tel.TemperatureMinC, tel.PowerMaxWatts = &t80, &t35, &pmax
	tel.ThrottleReasons = map[string]int{"hw_thermal_slowdown": tel.ThrottledSamples}
	tel.Notes = []string{"simulated" + f.x}
	f.steps[len(f.steps)-2].Telemetry, _ = json.Marshal(tel)
	burnDir := filepath.Join(f.dir, "steps", "burnin")
	if err := os.MkdirAll(burnDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(burnDir, gpu.TelemetryFile), []byte(tl.String()), 0o644)
}

// sample is GPU g's telemetry sample s of n, counted into tel.
func (f *fixture) sample(tel *gpu.Summary, s, n, g int, at time.Time) runtypes.TelemetryLine {
	frac := float64(s) / float64(n)
	temp := uint32(35 + 45*(1-math.Exp(-6*frac)) + 2*f.rng.Float64() + float64(g))
	// The software power cap is expected under load (not a throttle);
	// an HW thermal slowdown is one.
	capped := frac > 0.3 && frac < 0.38
	throttled := frac > 0.7 && frac < 0.74
	power := 640 + 40*f.rng.Float64()
	sm := uint32(1980)
	var mask uint64
	switch {
	case capped:
		power, sm, mask = 699+f.rng.Float64(), uint32(1500+f.rng.IntN(200)), 0x4 // sw_power_cap
		tel.PowerCappedSamples++
	case throttled:
		power, sm, mask = 520+f.rng.Float64(), uint32(1100+f.rng.IntN(200)), 0x40 // hw_thermal_slowdown
	}
	memUsed := uint64(20<<30 + s*(64<<10))
	tel.Samples++
	if throttled {
		tel.ThrottledSamples++
	}
	return runtypes.TelemetryLine{Time: at, Kind: "sample", GPU: g, TemperatureC: &temp, PowerWatts: &power,
		SMClockMHz: &sm, ClockEventMask: &mask, ClockEventReasons: gpu.ClockEventReasons(mask), Throttled: throttled, PowerCapped: capped, MemoryUsedBytes: &memUsed, Simulated: true}
}

// writeJSON writes v to path (indented or compact), making its directory.
func writeJSON(path string, v any, indent bool) error {
	var raw []byte
	var err error
	if indent {
		raw, err = json.MarshalIndent(v, "", "  ")
	} else {
		raw, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// trend fits a least-squares line through series, as the burn-in does.
func trend(series []int64) *suite.Trend {
	ys := make([]float64, len(series))
	for i, v := range series {
		ys[i] = float64(v)
	}
	t := &suite.Trend{Series: series}
	if s, ok := suite.Slope(ys); ok {
		t.SlopePerIteration = &s
	}
	return t
}

func ptrInt(v int) *int { return &v }
