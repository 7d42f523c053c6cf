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

	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/hardware"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/suite"
	"github.com/gpuattest/gpuattest/pipeline/suite/stats"
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
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	x := o.Text
	u64 := func(v uint64) *uint64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	hw := &hardware.Record{Simulated: true,
		Host:          hardware.Host{CPUModel: "Simulated CPU" + x, CPUCores: 32, MemoryBytes: 256 << 30, Kernel: "6.1.0", OS: "Debian GNU/Linux 12 (bookworm)"},
		DriverVersion: "550.54.15", CUDADriverVersion: "12.4", NVMLVersion: "12.550.54.15"}
	for g := 0; g < o.GPUs; g++ {
		sm, mem := uint32(1980), uint32(2619)
		gen, width := 5, 16
		hw.GPUs = append(hw.GPUs, hardware.GPU{Index: g, Name: "NVIDIA H100 80GB HBM3" + x, UUID: fmt.Sprintf("GPU-%08d-sim", g), PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+g),
			ComputeCapability: "9.0", MemoryTotalBytes: u64(80 << 30), ECCEnabled: b(true), MIGEnabled: b(false), PowerLimitWatts: f64(700),
			MaxClocksMHz: &hardware.Clocks{SM: &sm, Mem: &mem}, PCIe: &hardware.PCIe{Gen: &gen, Width: &width}, VBIOS: "96.00.74.00.0D"})
	}
	if err := hw.Seal(); err != nil {
		return err
	}
	at := func(sec float64) *time.Time { t := t0.Add(time.Duration(sec * float64(time.Second))); return &t }
	exit0 := 0
	host := &runner.Info{Name: "host", Isolation: "none"}
	var steps []*engine.StepRecord
	add := func(sr *engine.StepRecord, details any) {
		if details != nil {
			raw, _ := json.Marshal(details)
			sr.Details = raw
		}
		if sr.StartedAt != nil && sr.FinishedAt != nil {
			sr.DurationMS = sr.FinishedAt.Sub(*sr.StartedAt).Milliseconds()
		}
		sr.Runner, sr.Runs = host, 1
		steps = append(steps, sr)
	}

	// A cached cuda-build of two fatbins for sm_80 and sm_90.
	hex := func(c byte) string { return strings.Repeat(string(c), 64) }
	build := &cuda.BuildDetails{Targets: []string{"sm_80", "sm_90"}, Output: "fatbin", PTX: true,
		Reproducibility: &cuda.ReproReport{Reproducible: true, FirstDir: "a", SecondDir: "b", Identical: []string{"build/vector_add.fatbin"}}}
	for i, name := range []string{"vector_add", "sgemm" + x} {
		build.Artifacts = append(build.Artifacts, &cuda.Inspection{Path: "build/" + name + ".fatbin", SHA256: hex("ab"[i]), Size: 9000 + int64(i)*1000,
			SASS: []string{"sm_80", "sm_90"}, PTX: []string{"compute_90"},
			Cubins: []cuda.Cubin{{Name: name + ".sm_80.cubin", Arch: "sm_80", SHA256: hex("cd"[i])}, {Name: name + ".sm_90.cubin", Arch: "sm_90", SHA256: hex("ef"[i])}}})
	}
	add(&engine.StepRecord{ID: "kernels", Kind: "cuda-build", State: engine.Passed, StartedAt: at(0), FinishedAt: at(0.4), Cache: "hit", ExitCode: &exit0}, build)
	add(&engine.StepRecord{ID: "harness", Kind: "exec", State: engine.Passed, StartedAt: at(0), FinishedAt: at(6), Cache: "miss", ExitCode: &exit0}, &engine.ExecDetails{})
	add(&engine.StepRecord{ID: "test", Kind: "test", State: engine.Passed, StartedAt: at(6), FinishedAt: at(9), ExitCode: &exit0},
		&suite.TestDetails{Results: "build/results.json", Format: "gpuattest", Backend: "cuda", Device: "NVIDIA H100 80GB HBM3" + x, Counts: suite.Counts{Total: 12, Passed: 12}})

	// A benchmark against a same-run reference: three cases, the last one
	// 8 % slower, with a few slow outliers.
	gate := stats.Gate{Threshold: 0.03, Alpha: 0.01}
	bd := &suite.BenchmarkDetails{Schema: suite.BenchmarkSchemaID, Backend: "cuda", Device: "NVIDIA H100 80GB HBM3" + x, Warmup: ptrInt(5), Repeats: "15",
		Reference: &suite.ReferenceResult{Run: "build/ref/harness", Results: "build/ref.json", Backend: "cuda", Rounds: 30, Order: "RCCR CRRC",
			Report: &suite.Report{Gate: gate, Counts: map[stats.Verdict]int{}}}}
	for i, c := range []struct {
		name  string
		ns    float64
		shift float64
	}{{"vector_add/n=16777216", 180e3, 0}, {"sgemm/m=4096/n=4096/k=4096" + x, 2.1e6, -0.05}, {"softmax/rows=8192/cols=8192", 650e3, 0.08}} {
		draw := func(base float64) []float64 {
			xs := make([]float64, o.Samples)
			for j := range xs {
				xs[j] = base * math.Exp(0.02*rng.NormFloat64())
				if rng.IntN(50) == 0 {
					xs[j] *= 1.5 + rng.Float64()
				}
			}
			return xs
		}
		cand, ref := draw(c.ns*(1+c.shift)), draw(c.ns)
		cs, _ := stats.Summarize(cand)
		rs, _ := stats.Summarize(ref)
		bd.Cases = append(bd.Cases, suite.BenchmarkCase{Name: c.name, Kernel: strings.Split(c.name, "/")[0], Status: "passed", Stats: &cs, SamplesNS: cand})
		bd.Reference.Cases = append(bd.Reference.Cases, suite.BenchmarkCase{Name: c.name, Status: "passed", Stats: &rs, SamplesNS: ref})
		cmp, err := stats.Compare(ref, cand, gate)
		if err != nil {
			return err
		}
		cmp.Method = stats.MethodPaired
		if i == 2 {
			cmp.Reason = "slower by 8.0 % " + x
		}
		bd.Reference.Report.Cases = append(bd.Reference.Report.Cases, suite.CaseComparison{Name: c.name, Comparison: cmp})
		bd.Reference.Report.Counts[cmp.Verdict]++
		bd.Reference.Report.Failed = bd.Reference.Report.Failed || cmp.Verdict == stats.Slower
	}
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
	benchState, benchReason := engine.Passed, ""
	if bd.Reference.Report.Failed {
		benchState, benchReason = engine.Failed, "benchmark softmax/rows=8192/cols=8192 SLOWER than the reference: +8.0 %"+x
	}
	add(&engine.StepRecord{ID: "bench", Kind: "benchmark", State: benchState, Reason: benchReason, StartedAt: at(9), FinishedAt: at(80), ExitCode: &exit0}, &slim)

	// A GPU burn-in with telemetry.
	secs := o.Telemetry.Seconds()
	iters := max(10, int(secs/4))
	bur := &suite.BurninDetails{Requested: o.Telemetry.String(), Elapsed: o.Telemetry.String(), Completed: true, Iterations: iters, Cases: 4, OutputsChecked: 4,
		LeakToleranceBytes: 1 << 20, Notes: []string{"note" + x}}
	var rss, dev []int64
	for i := 0; i < iters; i++ {
		bur.IterationSeconds = append(bur.IterationSeconds, 4+0.1*rng.NormFloat64())
		rss = append(rss, 900<<20+int64(rng.IntN(4<<20)))
		dev = append(dev, 20<<30+int64(i)*(64<<10))
	}
	bur.HostRSS = trend(rss)
	bur.DeviceMemory = trend(dev)
	tmin, tmax, share := 35.0, 83.0, 0.1
	bur.TempMinC, bur.TempMaxC, bur.ThrottleShare = &tmin, &tmax, &share
	tel := &gpu.Summary{Simulated: true, IntervalSeconds: 1, DurationSeconds: secs, Verdict: gpu.Verdict{Status: gpu.VerdictPassed}}
	bStart := 80.0
	add(&engine.StepRecord{ID: "burnin", Kind: "burnin", State: engine.Passed, StartedAt: at(bStart), FinishedAt: at(bStart + secs), ExitCode: &exit0}, bur)
	add(&engine.StepRecord{ID: "publish", Kind: "exec", State: engine.Skipped, Reason: "needs bench, which did not pass" + x}, nil)

	// telemetry.jsonl: temperature rising to a plateau, power at the cap
	// with throttling in two windows, an Xid and an ECC event.
	burnDir := filepath.Join(dir, "steps", "burnin")
	if err := os.MkdirAll(burnDir, 0o755); err != nil {
		return err
	}
	var tl strings.Builder
	enc := json.NewEncoder(&tl)
	n := int(secs)
	for s := 0; s < n; s++ {
		for g := 0; g < o.GPUs; g++ {
			f := float64(s) / float64(n)
			temp := uint32(35 + 45*(1-math.Exp(-6*f)) + 2*rng.Float64() + float64(g))
			throttled := (f > 0.3 && f < 0.38) || (f > 0.7 && f < 0.74)
			power := 640 + 40*rng.Float64()
			sm := uint32(1980)
			var mask uint64
			if throttled {
				power, sm, mask = 699+rng.Float64(), uint32(1500+rng.IntN(200)), 4 // sw_power_cap
			}
			memUsed := uint64(20<<30 + s*(64<<10))
			tel.Samples++
			if throttled {
				tel.ThrottledSamples++
			}
			l := gpu.Line{Time: t0.Add(time.Duration((bStart + float64(s)) * float64(time.Second))), Kind: "sample", GPU: g, TemperatureC: &temp, PowerWatts: &power,
				SMClockMHz: &sm, ClockEventMask: &mask, ClockEventReasons: gpu.ClockEventReasons(mask), Throttled: throttled, MemoryUsedBytes: &memUsed, Simulated: true}
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		if s == n/2 {
			xid := uint64(94)
			if err := enc.Encode(gpu.Line{Time: t0.Add(time.Duration((bStart + float64(s)) * float64(time.Second))), Kind: "xid", Xid: &xid, Simulated: true}); err != nil {
				return err
			}
			tel.XidEvents = append(tel.XidEvents, gpu.XidEvent{Time: t0.Add(time.Duration((bStart + float64(s)) * float64(time.Second))), Xid: 94, Description: "contained ECC error" + x})
		}
		if s == 3*n/4 {
			if err := enc.Encode(gpu.Line{Time: t0.Add(time.Duration((bStart + float64(s)) * float64(time.Second))), Kind: "ecc_dbe", Simulated: true}); err != nil {
				return err
			}
		}
	}
	if tel.Samples > 0 {
		tel.ThrottleShare = float64(tel.ThrottledSamples) / float64(tel.Samples)
	}
	t80, t35, pmax := uint32(83), uint32(35), 700.0
	tel.TemperatureMaxC, tel.TemperatureMinC, tel.PowerMaxWatts = &t80, &t35, &pmax
	tel.ThrottleReasons = map[string]int{"sw_power_cap": tel.ThrottledSamples}
	tel.Notes = []string{"simulated" + x}
	steps[len(steps)-2].Telemetry, _ = json.Marshal(tel)
	if err := os.WriteFile(filepath.Join(burnDir, gpu.TelemetryFile), []byte(tl.String()), 0o644); err != nil {
		return err
	}
	benchDir := filepath.Join(dir, "steps", "bench")
	if err := os.MkdirAll(benchDir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(bd, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(benchDir, "benchmark.json"), raw, 0o644); err != nil {
		return err
	}

	hwRaw, err := json.Marshal(hw)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "hardware.json"), hwRaw, 0o644); err != nil {
		return err
	}
	fin := t0.Add(time.Duration((bStart + secs) * float64(time.Second)))
	rec := &engine.Record{Schema: engine.RecordSchema, Pipeline: engine.PipelineRef{Name: "release" + x, Path: "pipelines/release.yaml", Digest: "sha256:" + hex('9')},
		Version: "v0.9.0", State: engine.Failed, Reason: "steps not passed: bench" + x, StartedAt: t0, FinishedAt: &fin,
		Hardware: &engine.HardwareRef{Digest: hw.Digest, Simulated: true, File: "hardware.json"}, Steps: steps, Attempts: []engine.Attempt{{StartedAt: t0, FinishedAt: &fin}}}
	raw, err = json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "run.json"), raw, 0o644)
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
