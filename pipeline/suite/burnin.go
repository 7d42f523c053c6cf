package suite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline/floors"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// DefaultLeakTolerance is the largest memory slope a burn-in accepts, in
// bytes per iteration (per memory sample in a sustained run), when the
// step sets no leakTolerance.
const DefaultLeakTolerance = 1 << 20

// DefaultMinDutyCycle is the busy share of a sustained run's wall time a
// burn-in on a GPU (results backend cuda) must reach when the step sets no
// minDutyCycle. On the CPU backend the duty cycle is only reported unless
// the step sets one.
const DefaultMinDutyCycle = 0.95

// MinPowerShare is the share of a GPU's power limit its peak power must
// reach in a burn-in on the cuda backend, unless the software power cap
// held its clocks (sw_power_cap seen, which means the GPU was at its
// limit): a burn-in that leaves the GPU far below its limit never
// provokes the power, VRM and cooling faults that appear at TDP.
const MinPowerShare = 0.85

// MinNVMLUtilization is the median NVML utilization a GPU must show in a
// burn-in on the cuda backend: NVML counts the time a kernel ran on the
// GPU, independently of the harness's own duty cycle, so a harness that
// counts idle time as busy is caught.
const MinNVMLUtilization = 0.90

// minUtilSamples is the fewest utilization samples the median is judged
// on.
const minUtilSamples = 3

// minTrendIterations is the fewest iterations a memory slope is judged on.
const minTrendIterations = 3

// telemetryFile is the engine's telemetry for a gpu: true step, in the
// step directory (pipeline/runlayout).
const telemetryFile = runlayout.TelemetryFile

// Burnin executes burnin steps. Every invocation of the command gets
// GPUATTEST_DURATION, the seconds of the burn-in still to run (with
// GPUATTEST_WARMUP, GPUATTEST_REPEATS and GPUATTEST_SEED when the step
// sets them).
//
// A suite that honours GPUATTEST_DURATION (the kernel harness's sustained
// mode, --duration) runs the whole burn-in in one process, launching its
// cases back to back and checking the output of every repeat, and says so
// with a "sustained" block in its results. The step then judges that run:
// its cases and every repeat's output consistency, its duty cycle (at
// least minDutyCycle, 95 % by default on a GPU; reported only on the CPU
// backend unless set), the slope of its in-process memory samples (host
// RSS and device memory, per sample, against leakTolerance) and the loop
// error, if any. It runs the command again only if the suite stopped
// short of the duration.
//
// Any other suite ignores GPUATTEST_DURATION and writes results without a
// "sustained" block: the step then runs it again and again, each
// iteration a full run, until the duration has elapsed, and fails on any
// failing iteration, on outputs that differ between iterations (per-case
// output_sha256) and on a memory trend (least-squares slope of the
// per-iteration host max RSS, or of the device memory the cases report)
// beyond the leak tolerance.
//
// Either way a burn-in shorter than asked is a failure, never a pass. For
// a gpu: true step the engine samples telemetry into the step directory;
// the step fills the temperature range and throttle share from the
// samples of the GPU the results name (device_uuid, matched against the
// hardware record), or of every GPU when they name none.
type Burnin struct {
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
}

var _ step.Executor = Burnin{}

// BurninDetails is a burnin step's facts (Outcome.Details).
type BurninDetails struct {
	// Requested is the duration asked for; Elapsed what ran.
	Requested string `json:"requested"`
	Elapsed   string `json:"elapsed"`
	// Completed is true when the burn-in ran for the whole duration.
	Completed bool `json:"completed"`
	// Sustained is true when the suite ran the burn-in itself (its results
	// declared a sustained run): Iterations then count its rounds (every
	// case launched once) and the memory trends come from its in-process
	// samples.
	Sustained bool `json:"sustained,omitempty"`
	// Invocations is the number of times the command ran.
	Invocations int `json:"invocations"`
	// Iterations is the number of full runs, or of a sustained run's rounds.
	Iterations int `json:"iterations"`
	// Backend, Device and DeviceUUID are what the results report.
	Backend    string `json:"backend,omitempty"`
	Device     string `json:"device,omitempty"`
	DeviceUUID string `json:"device_uuid,omitempty"`
	// CUDAVisibleDevices is CUDA_VISIBLE_DEVICES as the suite saw it.
	CUDAVisibleDevices string `json:"cuda_visible_devices,omitempty"`
	// IterationSeconds is the wall time of each invocation, in order.
	IterationSeconds []float64 `json:"iteration_s,omitempty"`
	// Cases is the number of cases per iteration; OutputsChecked how many
	// of them report an output digest compared across iterations (or, in
	// a sustained run, had every repeat compared with their first).
	Cases          int `json:"cases"`
	OutputsChecked int `json:"outputs_checked"`
	// RepeatsChecked is the number of repeats of a sustained run whose
	// output was compared with the first repeat's.
	RepeatsChecked int64 `json:"repeats_checked,omitempty"`
	// Mismatches lists output digests that changed.
	Mismatches []string `json:"mismatches,omitempty"`
	// DutyCycle is a sustained run's busy share of its wall time; Timing
	// says how busy time was measured (cuda_events, steady_clock).
	DutyCycle *float64 `json:"duty_cycle,omitempty"`
	Timing    string   `json:"timing,omitempty"`
	// MinDutyCycle is the share the step required; nil when the duty
	// cycle was only reported.
	MinDutyCycle *float64 `json:"min_duty_cycle,omitempty"`
	// BusySeconds is a sustained run's time in kernels (summed over
	// threads on cpu).
	BusySeconds float64 `json:"busy_s,omitempty"`
	// HostRSS is the trend of the per-iteration peak host RSS, or of a
	// sustained run's host RSS samples.
	HostRSS *Trend `json:"host_rss,omitempty"`
	// DeviceMemory is the trend of the largest device_memory_used_bytes
	// the cases report per iteration (cuda backend), or of a sustained
	// run's device memory samples.
	DeviceMemory *Trend `json:"device_memory,omitempty"`
	// LeakToleranceBytes is the largest slope accepted, bytes per iteration
	// (per memory sample in a sustained run).
	LeakToleranceBytes int64 `json:"leak_tolerance_bytes"`
	// FailedIteration is the 1-based iteration (invocation, in a
	// sustained run) that failed, if any.
	FailedIteration int `json:"failed_iteration,omitempty"`
	// TempMinC, TempMaxC and ThrottleShare come from the step's telemetry
	// (gpu: true steps): the range of the GPU's temperature and the share
	// of samples with a power, thermal or hardware slowdown reason.
	TempMinC      *float64 `json:"temp_min_c,omitempty"`
	TempMaxC      *float64 `json:"temp_max_c,omitempty"`
	ThrottleShare *float64 `json:"throttle_share,omitempty"`
	// TelemetryGPU is the NVML index of the GPU those come from; nil when
	// they span every GPU. TelemetrySamples counts the samples used.
	TelemetryGPU     *int `json:"telemetry_gpu,omitempty"`
	TelemetrySamples int  `json:"telemetry_samples,omitempty"`
	// GPUs are the burned-in GPUs one by one: each device of a run over
	// several (the results' devices) or the one GPU the results name,
	// with what telemetry saw of it.
	GPUs []BurninGPU `json:"gpus,omitempty"`
	// Floors are the floors of each GPU's model (pipeline/floors) the
	// burn-in judged it against, or "no floor: not judged".
	Floors []attest.AppliedFloor `json:"floors,omitempty"`
	// Notes are facts worth reading (e.g. no output digests to compare).
	Notes []string `json:"notes,omitempty"`
}

// BurninGPU is one GPU of a burn-in.
type BurninGPU struct {
	// Index is the GPU's NVML index in the hardware record; nil when the
	// record does not list it.
	Index *int `json:"index,omitempty"`
	// UUID identifies the GPU.
	UUID string `json:"uuid,omitempty"`
	// Ordinal is its CUDA ordinal in the results, when they list devices.
	Ordinal *int `json:"ordinal,omitempty"`
	// Model is its name in the hardware record (else as the results
	// name it): the key of its floors and of the node median below.
	Model string `json:"model,omitempty"`
	// DutyCycle, Iterations, RepeatsChecked and Mismatches are the
	// device's own sustained loop, when the results list devices.
	DutyCycle      *float64 `json:"duty_cycle,omitempty"`
	Iterations     int64    `json:"iterations,omitempty"`
	RepeatsChecked int64    `json:"repeats_checked,omitempty"`
	Mismatches     int64    `json:"mismatches,omitempty"`
	// Error is the device's own error, when it had one.
	Error string `json:"error,omitempty"`
	// Samples counts its telemetry samples; LoopSamples those taken while
	// the sustained loop ran (the results' loop window), which the load,
	// utilization and memory-trend rules judge.
	Samples     int `json:"samples,omitempty"`
	LoopSamples int `json:"loop_samples,omitempty"`
	// TempMinC and TempMaxC are its temperature range.
	TempMinC *float64 `json:"temp_min_c,omitempty"`
	TempMaxC *float64 `json:"temp_max_c,omitempty"`
	// PowerMaxWatts is its peak power; PowerMedianWatts its median over
	// the loop; PowerLimitWatts its enforced limit from the hardware
	// record.
	PowerMaxWatts    *float64 `json:"power_max_w,omitempty"`
	PowerMedianWatts *float64 `json:"power_median_w,omitempty"`
	PowerLimitWatts  *float64 `json:"power_limit_w,omitempty"`
	// PowerCappedShare is the share of the loop's samples at the software
	// power cap (expected under load); ThrottleShare the share of all
	// samples with a slowdown.
	PowerCappedShare *float64 `json:"power_capped_share,omitempty"`
	ThrottleShare    *float64 `json:"throttle_share,omitempty"`
	// Loaded says whether the burn-in held the GPU at its power limit: a
	// median power over the loop of at least its model's power floor
	// (MinPowerShare of the limit), or the power cap in at least
	// MinCappedShare of the loop's samples; nil when not judged (not the
	// cuda backend, or no power readings).
	Loaded *bool `json:"loaded,omitempty"`
	// BurnKernel and BurnTFLOPS are the burn case's kernel and what it
	// achieved on this GPU; BurnFirstTFLOPS and BurnLastTFLOPS over the
	// loop's first and last windows (10 s, or a third of a shorter loop);
	// BurnNodeMedianTFLOPS the median of the node's GPUs of its model.
	BurnKernel           string   `json:"burn_kernel,omitempty"`
	BurnTFLOPS           *float64 `json:"burn_tflops,omitempty"`
	BurnFirstTFLOPS      *float64 `json:"burn_first_tflops,omitempty"`
	BurnLastTFLOPS       *float64 `json:"burn_last_tflops,omitempty"`
	BurnNodeMedianTFLOPS *float64 `json:"burn_node_median_tflops,omitempty"`
	// Utilization is the median of NVML's utilization samples (0-1) and
	// UtilizationSamples their count: the cross-check of DutyCycle.
	Utilization        *float64 `json:"nvml_utilization,omitempty"`
	UtilizationSamples int      `json:"nvml_utilization_samples,omitempty"`
	// DeviceMemory is the trend of the GPU's used memory as NVML reports
	// it (the whole device, whoever allocated it), per telemetry sample,
	// over the samples between the first and last tenth (allocation and
	// release); its series is thinned to at most maxTrendPoints points.
	DeviceMemory *Trend `json:"device_memory,omitempty"`
}

// maxTrendPoints bounds a trend series kept in the results.
const maxTrendPoints = 512

// Trend is a least-squares line through a per-iteration series (in a
// sustained run, a series of memory samples).
type Trend struct {
	// Series are the per-iteration values (bytes).
	Series []int64 `json:"series"`
	// SlopePerIteration is the fitted slope in bytes per iteration (per
	// sample); nil when there are too few points.
	SlopePerIteration *float64 `json:"slope_bytes_per_iteration,omitempty"`
	// IntervalSeconds is the time between a sustained run's samples.
	IntervalSeconds float64 `json:"interval_s,omitempty"`
}

// Slope returns the least-squares slope of ys against 0..n-1, and false
// for fewer than two points.
func Slope(ys []float64) (float64, bool) {
	n := float64(len(ys))
	if len(ys) < 2 {
		return 0, false
	}
	var sx, sy, sxx, sxy float64
	for i, y := range ys {
		x := float64(i)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, false
	}
	return (n*sxy - sx*sy) / den, true
}

func trend(series []int64) *Trend {
	t := &Trend{Series: series}
	if len(series) >= minTrendIterations {
		ys := make([]float64, len(series))
		for i, v := range series {
			ys[i] = float64(v)
		}
		if s, ok := Slope(ys); ok {
			t.SlopePerIteration = &s
		}
	}
	return t
}

// burnRun is one burnin step in progress.
type burnRun struct {
	s        *step.Context
	d        *BurninDetails
	out      *step.Outcome
	tol      int64
	want     time.Duration  // the duration asked
	minDuty  *float64       // the duty cycle required, nil: reported only
	devices  []ResultDevice // the results' devices (a run over several)
	env      []string       // the knobs every invocation gets
	start    time.Time
	elapsed  time.Duration
	failures []string
	// first maps each case to its output digest in iteration 1; caseSet
	// is iteration 1's case names.
	first   map[string]string
	caseSet []string
	// Generic runs: per-iteration peak host RSS and device memory.
	rss, devMem []int64
	sawDev      bool
	// Sustained runs: duty cycle weighted by loop time.
	dutyTime, loopTime float64
	// windows are the sustained loops' windows by lowercased device UUID
	// ("": the run's, over every device); burns the burn throughput by
	// device UUID (the invocation that burned longest).
	windows map[string][]loopWindow
	burns   map[string]*BurnThroughput
}

func (br *burnRun) fail(iter int, format string, args ...any) {
	if br.d.FailedIteration == 0 {
		br.d.FailedIteration = iter
	}
	br.failures = append(br.failures, fmt.Sprintf("iteration %d: ", iter)+fmt.Sprintf(format, args...))
}

// Execute runs the burnin step s.Step: it invokes the suite until the
// requested duration is spent (once, for a suite that sustains the
// burn-in itself), then judges outputs, memory trends, duty cycle and
// telemetry.
func (b Burnin) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	now := b.Now
	if now == nil {
		now = time.Now
	}
	br, err := newBurnRun(s)
	if err != nil {
		return nil, err
	}
	resFile, err := resultsFile(s)
	if err != nil {
		return nil, err
	}
	lastRead, err := br.loop(ctx, now, resFile)
	if err != nil {
		return nil, err
	}
	if lastRead != nil {
		if f, err := writeBytesToStep(s, "results-last"+extOf(resFile.rel), "results", lastRead); err == nil {
			br.out.Results = append(br.out.Results, f)
		}
	}
	return br.verdict(), nil
}

// newBurnRun reads the step's settings.
func newBurnRun(s *step.Context) (*burnRun, error) {
	want := s.Step.Duration.Value()
	if want <= 0 {
		return nil, fmt.Errorf("step %s: duration %q: expected a positive duration such as 30s or 1h", s.Step.ID, s.Step.Duration)
	}
	tol := int64(DefaultLeakTolerance)
	if !s.Step.LeakTolerance.IsZero() {
		tol = int64(min(s.Step.LeakTolerance.Bytes, math.MaxInt64))
	}
	br := &burnRun{s: s, tol: tol, want: want}
	if !s.Step.MinDutyCycle.IsZero() {
		v := s.Step.MinDutyCycle.Fraction
		if !(v > 0 && v <= 1) {
			return nil, fmt.Errorf("step %s: minDutyCycle %q: expected a percentage above 0%% and at most 100%%, such as 95%%", s.Step.ID, s.Step.MinDutyCycle)
		}
		br.minDuty = &v
	}
	if s.Step.Warmup != nil {
		br.env = append(br.env, "GPUATTEST_WARMUP="+strconv.Itoa(*s.Step.Warmup))
	}
	if s.Step.Repeats.N > 0 {
		br.env = append(br.env, "GPUATTEST_REPEATS="+strconv.Itoa(s.Step.Repeats.N))
	}
	if len(s.Step.Seeds) > 0 {
		br.env = append(br.env, "GPUATTEST_SEED="+strconv.Itoa(s.Step.Seeds[0]))
	}
	br.d = &BurninDetails{Requested: want.String(), LeakToleranceBytes: tol}
	br.out = &step.Outcome{Status: step.Passed, Details: br.d}
	return br, nil
}

// loop invokes the suite until the duration is spent or an iteration
// fails; it returns the results file as last read (nil when iteration 1
// left none that parsed).
func (br *burnRun) loop(ctx context.Context, now func() time.Time, resFile *rootedFile) ([]byte, error) {
	s, d := br.s, br.d
	var parsed bool
	var lastRead []byte
	br.start = now()
	for iter := 1; ; iter++ {
		left := br.want - now().Sub(br.start)
		if iter > 1 && left <= 0 {
			break
		}
		if err := resFile.remove(); err != nil {
			return nil, err
		}
		// The burn-in still to run, for a suite that sustains it itself.
		duration := "GPUATTEST_DURATION=" + strconv.FormatFloat(max(left.Seconds(), 0.001), 'f', 3, 64)
		iterStart := now()
		res, err := runStep(ctx, s, append(slices.Clip(br.env), duration)...)
		if err != nil {
			if ctx.Err() != nil {
				d.Elapsed = now().Sub(br.start).Round(time.Millisecond).String()
				br.failures = append(br.failures, fmt.Sprintf("cut short after %s of %s in iteration %d: %v", d.Elapsed, br.want, iter, context.Cause(ctx)))
				break
			}
			return nil, err
		}
		br.out.ExitCode = exitPtr(res)
		d.Invocations = iter
		d.IterationSeconds = append(d.IterationSeconds, now().Sub(iterStart).Seconds())
		r, b, err := readResults(resFile, s.Step.Format)
		if b != nil && (parsed || err == nil) {
			lastRead = b
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil, err
			}
			br.fail(iter, "results: %s", firstLine(err.Error()))
			break
		}
		parsed = true
		if !br.take(iter, r, res.ExitCode, res.MaxRSSBytes) {
			break
		}
	}
	br.elapsed = now().Sub(br.start)
	if d.Elapsed == "" {
		d.Elapsed = br.elapsed.Round(time.Millisecond).String()
	}
	return lastRead, nil
}

// take judges one invocation's results; it returns false to stop.
func (br *burnRun) take(iter int, r *Results, exitCode int, maxRSS int64) bool {
	d := br.d
	if iter == 1 {
		d.Sustained = r.Sustained != nil
		d.Backend, d.Device, d.DeviceUUID = r.Backend, r.Device, r.DeviceUUID
		br.out.DeviceUUID = r.DeviceUUID
		br.devices = r.Devices
		d.CUDAVisibleDevices = r.CUDAVisibleDevices
	} else if (r.Sustained != nil) != d.Sustained {
		br.fail(iter, "the results of iteration 1 and %d disagree on whether the suite ran sustained (a \"sustained\" block)", iter)
		return false
	}
	if exitCode != 0 {
		br.fail(iter, "command exited %d", exitCode)
	}
	if d.Sustained {
		br.sustained(iter, r)
	} else {
		br.generic(iter, r, maxRSS)
	}
	br.compareOutputs(iter, r)
	br.s.Report(runtypes.Progress{Iterations: d.Iterations, Errors: len(br.failures)})
	return len(br.failures) == 0
}

// verdict judges the whole burn-in and returns the outcome.
func (br *burnRun) verdict() *step.Outcome {
	d, out := br.d, br.out
	if d.Invocations > 0 && d.OutputsChecked == 0 {
		d.Notes = append(d.Notes, "no case reports output_sha256: output consistency was not checked")
	}
	if d.Sustained {
		br.judgeSustained(br.minDuty)
	} else {
		br.judgeGeneric()
	}
	br.telemetry()
	failures := br.failures
	if len(failures) == 0 && br.elapsed < br.want {
		failures = append(failures, fmt.Sprintf("ran %s of the %s asked: a burn-in shorter than asked is a failure", d.Elapsed, br.want))
	}
	d.Completed = len(failures) == 0
	if len(failures) > 0 {
		out.Status = step.Failed
		out.Reason = "burn-in " + strings.Join(failures, "; ")
		return out
	}
	if d.Sustained {
		out.Reason = fmt.Sprintf("sustained run: %d iterations in %s, duty cycle %.1f%% (%s), outputs of %d repeats of %d cases identical to their first",
			d.Iterations, d.Elapsed, 100*derefOr(d.DutyCycle, 0), d.Timing, d.RepeatsChecked, d.OutputsChecked)
	} else {
		out.Reason = fmt.Sprintf("%d iterations in %s, outputs of %d cases identical", d.Iterations, d.Elapsed, d.OutputsChecked)
	}
	return out
}

func derefOr(p *float64, v float64) float64 {
	if p == nil {
		return v
	}
	return *p
}

// caseFailures fails iteration iter for every case of r that failed or
// errored, except a sustained case whose only fault is outputs that
// differed (compareOutputs reports those).
func (br *burnRun) caseFailures(iter int, r *Results) {
	for _, c := range r.Cases {
		if c.Status != StatusFailed && c.Status != StatusError {
			continue
		}
		if c.Status == StatusFailed && c.Sustained != nil && c.Sustained.Mismatches > 0 {
			continue
		}
		msg := ""
		if c.Message != "" {
			msg = ": " + firstLine(c.Message)
		}
		br.fail(iter, "case %s %s%s", c.Name, c.Status, msg)
	}
	if len(r.Cases) == 0 {
		br.fail(iter, "results hold no case")
	}
}

// generic takes one full run of a suite that does not sustain itself.
func (br *burnRun) generic(iter int, r *Results, maxRSS int64) {
	br.d.Iterations = iter
	br.rss = append(br.rss, maxRSS)
	br.caseFailures(iter, r)
	var dm int64
	for _, c := range r.Cases {
		if c.DeviceMemoryUsedBytes > 0 {
			br.sawDev = true
			dm = max(dm, c.DeviceMemoryUsedBytes)
		}
	}
	br.devMem = append(br.devMem, dm)
}

// sustained takes one invocation of a suite that ran sustained.
func (br *burnRun) sustained(iter int, r *Results) {
	d, sus := br.d, r.Sustained
	d.Iterations += int(sus.Iterations)
	d.RepeatsChecked += sus.OutputsChecked
	d.BusySeconds += sus.BusySeconds
	if d.Timing == "" {
		d.Timing = sus.Timing
	}
	br.dutyTime += sus.DutyCycle * sus.ElapsedSeconds
	br.loopTime += sus.ElapsedSeconds
	br.addLoop("", sus.LoopFromUnixNS, sus.LoopToUnixNS, r.DeviceUUID, sus.Burn)
	for _, dev := range r.Devices {
		if ds := dev.Sustained; ds != nil && dev.UUID != "" {
			br.addLoop(dev.UUID, ds.LoopFromUnixNS, ds.LoopToUnixNS, dev.UUID, ds.Burn)
		}
	}
	br.caseFailures(iter, r)
	for _, c := range r.Cases {
		if cs := c.Sustained; cs != nil && cs.Mismatches > 0 {
			d.Mismatches = append(d.Mismatches, fmt.Sprintf("iteration %d: %s: %d of %d repeats differ from repeat 1 (first: repeat %d)",
				iter, c.Name, cs.Mismatches, cs.Repeats-1, cs.FirstMismatch))
		}
	}
	if sus.Mismatches > 0 && len(d.Mismatches) == 0 {
		d.Mismatches = append(d.Mismatches, fmt.Sprintf("iteration %d: %d repeats differ from their first", iter, sus.Mismatches))
	}
	if len(d.Mismatches) > 0 {
		br.fail(iter, "outputs differ from repeat 1: %s", d.Mismatches[0])
	}
	if sus.Error != "" {
		br.fail(iter, "sustained run: %s", firstLine(sus.Error))
	}
	// The memory samples after the loop started (the first precedes the
	// workers' first allocations), one trend per kind; the steepest over
	// the invocations is kept.
	var host, dev []int64
	for _, m := range sus.Memory {
		if m.Iteration == 0 {
			continue
		}
		if m.HostRSSBytes > 0 {
			host = append(host, m.HostRSSBytes)
		}
		if m.DeviceUsedBytes > 0 {
			dev = append(dev, m.DeviceUsedBytes)
		}
	}
	d.HostRSS = steeper(d.HostRSS, host, sus.MemoryIntervalSeconds)
	d.DeviceMemory = steeper(d.DeviceMemory, dev, sus.MemoryIntervalSeconds)
}

// addLoop records a sustained loop's window under key (a device UUID, ""
// for the run's) and the burn throughput b of the device with uuid.
func (br *burnRun) addLoop(key string, from, to int64, uuid string, b *BurnThroughput) {
	if br.windows == nil {
		br.windows, br.burns = map[string][]loopWindow{}, map[string]*BurnThroughput{}
	}
	if from > 0 && to >= from {
		k := strings.ToLower(key)
		br.windows[k] = append(br.windows[k], loopWindow{from, to})
	}
	if b != nil && uuid != "" {
		k := strings.ToLower(uuid)
		if cur := br.burns[k]; cur == nil || b.BusySeconds > cur.BusySeconds {
			br.burns[k] = b
		}
	}
}

// steeper returns the trend of series, or cur when cur rises faster.
func steeper(cur *Trend, series []int64, interval float64) *Trend {
	if len(series) == 0 {
		return cur
	}
	t := trend(series)
	t.IntervalSeconds = interval
	if cur != nil && (t.SlopePerIteration == nil || (cur.SlopePerIteration != nil && *cur.SlopePerIteration >= *t.SlopePerIteration)) {
		return cur
	}
	return t
}

// compareOutputs checks that iteration iter ran the cases of iteration 1
// and that their output digests did not change.
func (br *burnRun) compareOutputs(iter int, r *Results) {
	d := br.d
	names := make([]string, 0, len(r.Cases))
	digests := map[string]string{}
	for _, c := range r.Cases {
		names = append(names, c.Name)
		if c.OutputSHA256 != "" {
			digests[c.Name] = c.OutputSHA256
		}
	}
	if iter == 1 {
		br.first, br.caseSet = digests, names
		d.Cases, d.OutputsChecked = len(names), len(digests)
		return
	}
	if strings.Join(names, "\x00") != strings.Join(br.caseSet, "\x00") {
		br.fail(iter, "the set of cases changed (%d cases, first iteration had %d)", len(names), len(br.caseSet))
	}
	bad := len(d.Mismatches)
	for name, want := range br.first {
		if got := digests[name]; got != want {
			if got == "" {
				got = "none"
			}
			d.Mismatches = append(d.Mismatches, fmt.Sprintf("iteration %d: %s output %s, iteration 1 %s", iter, name, short(got), short(want)))
		}
	}
	if len(d.Mismatches) > bad {
		br.fail(iter, "outputs differ from iteration 1: %s", d.Mismatches[bad])
	}
}

// judgeGeneric judges the memory trends of repeated full runs.
func (br *burnRun) judgeGeneric() {
	d := br.d
	if d.Iterations > 0 && d.Iterations < minTrendIterations {
		d.Notes = append(d.Notes, fmt.Sprintf("%d iterations: too few to judge a memory trend (need %d)", d.Iterations, minTrendIterations))
	}
	var anyRSS bool
	for _, v := range br.rss {
		anyRSS = anyRSS || v > 0
	}
	if anyRSS {
		d.HostRSS = trend(br.rss)
	} else if d.Iterations > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("the %s runner does not report peak RSS: host memory trend not checked", br.s.Runner.Name()))
	}
	if br.sawDev {
		d.DeviceMemory = trend(br.devMem)
	}
	br.judgeTrends("iteration")
}

// judgeSustained judges a sustained run's duty cycle and memory trends.
func (br *burnRun) judgeSustained(minDuty *float64) {
	d := br.d
	if br.loopTime > 0 {
		duty := br.dutyTime / br.loopTime
		d.DutyCycle = &duty
		simulated := br.s.Hardware != nil && br.s.Hardware.Simulated
		if minDuty == nil && d.Backend == "cuda" && !simulated {
			v := DefaultMinDutyCycle
			minDuty = &v
		}
		switch {
		case minDuty == nil && simulated:
			// On simulated GPUs the cuda backend is a fake driver whose
			// kernels share the host's CPUs: its duty cycle measures them.
			d.Notes = append(d.Notes, fmt.Sprintf("duty cycle %.1f%% on SIMULATED GPUs (%s backend): reported, not judged (set minDutyCycle to judge it)", 100*duty, d.Backend))
		case minDuty != nil:
			d.MinDutyCycle = minDuty
			if duty < *minDuty {
				br.failures = append(br.failures, fmt.Sprintf("duty cycle %.1f%% is below the %.1f%% asked (%s backend, %s): the kernels left the device idle for %.1f%% of the run",
					100*duty, 100**minDuty, d.Backend, d.Timing, 100*(1-duty)))
			}
		default:
			d.Notes = append(d.Notes, fmt.Sprintf("duty cycle %.1f%% on the %s backend: reported, not judged (set minDutyCycle to judge it)", 100*duty, d.Backend))
		}
	}
	for _, t := range []*Trend{d.HostRSS, d.DeviceMemory} {
		if t != nil && t.SlopePerIteration == nil {
			d.Notes = append(d.Notes, fmt.Sprintf("%d memory samples: too few to judge a memory trend (need %d)", len(t.Series), minTrendIterations))
			break
		}
	}
	if d.DeviceMemory != nil {
		d.Notes = append(d.Notes, "device memory is device-wide (cuMemGetInfo): another process on the GPU moves it too")
	}
	br.judgeTrends("memory sample")
}

// judgeTrends fails on a memory slope beyond the tolerance, per unit.
func (br *burnRun) judgeTrends(unit string) {
	d := br.d
	if t := d.HostRSS; t != nil && t.SlopePerIteration != nil && *t.SlopePerIteration > float64(br.tol) {
		br.failures = append(br.failures, fmt.Sprintf("host RSS rises by %.0f bytes per %s (tolerance %d): leak", *t.SlopePerIteration, unit, br.tol))
	}
	if t := d.DeviceMemory; t != nil && t.SlopePerIteration != nil && *t.SlopePerIteration > float64(br.tol) {
		br.failures = append(br.failures, fmt.Sprintf("device memory rises by %.0f bytes per %s (tolerance %d): leak", *t.SlopePerIteration, unit, br.tol))
	}
}

// scanSamples calls each for every sample line read from r (the step's
// telemetry.jsonl), reading at most limit lines when limit > 0; a line
// that is not JSON, or not a sample, is skipped.
func scanSamples(r io.Reader, limit int, each func(runtypes.TelemetryLine)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 0; sc.Scan() && (limit <= 0 || n < limit); n++ {
		var l runtypes.TelemetryLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Kind != "sample" {
			continue
		}
		each(l)
	}
	return sc.Err()
}

// gpuSample is one telemetry sample of a GPU, as a burn-in reads it.
type gpuSample struct {
	t                 time.Time
	temp, power, util *float64 // util 0-1
	mem               *int64
	capped, throttled bool
}

// gpuSamples are one GPU's telemetry samples in a burn-in, in order.
type gpuSamples struct {
	all []gpuSample
}

func (g *gpuSamples) add(l runtypes.TelemetryLine) {
	s := gpuSample{t: l.Time, capped: l.PowerCapped, throttled: l.Throttled, power: l.PowerWatts}
	if l.TemperatureC != nil {
		s.temp = ptrFloat(float64(*l.TemperatureC))
	}
	if l.UtilizationPct != nil {
		s.util = ptrFloat(float64(*l.UtilizationPct) / 100)
	}
	if l.MemoryUsedBytes != nil {
		m := int64(min(*l.MemoryUsedBytes, math.MaxInt64))
		s.mem = &m
	}
	g.all = append(g.all, s)
}

// sampleStats are what a set of samples says.
type sampleStats struct {
	n, throttled, capped int
	tmin, tmax, pmax     *float64
	power, util          []float64
	mem                  []int64
}

func statsOf(samples []gpuSample) sampleStats {
	var st sampleStats
	for _, s := range samples {
		st.n++
		if s.throttled {
			st.throttled++
		}
		if s.capped {
			st.capped++
		}
		if s.temp != nil {
			if st.tmin == nil || *s.temp < *st.tmin {
				st.tmin = ptrFloat(*s.temp)
			}
			if st.tmax == nil || *s.temp > *st.tmax {
				st.tmax = ptrFloat(*s.temp)
			}
		}
		if s.power != nil {
			st.power = append(st.power, *s.power)
			if st.pmax == nil || *s.power > *st.pmax {
				st.pmax = ptrFloat(*s.power)
			}
		}
		if s.util != nil {
			st.util = append(st.util, *s.util)
		}
		if s.mem != nil {
			st.mem = append(st.mem, *s.mem)
		}
	}
	return st
}

// busy reports whether any sample saw the GPU's utilization above zero.
func (st sampleStats) busy() bool {
	return slices.ContainsFunc(st.util, func(u float64) bool { return u > 0 })
}

// loopWindow is when a sustained loop ran, in Unix nanoseconds.
type loopWindow struct{ from, to int64 }

// inLoop returns the samples taken while one of windows ran; all of them
// (and false) when there is no window.
func inLoop(samples []gpuSample, windows []loopWindow) ([]gpuSample, bool) {
	if len(windows) == 0 {
		return samples, false
	}
	var out []gpuSample
	for _, s := range samples {
		ns := s.t.UnixNano()
		for _, w := range windows {
			if ns >= w.from && ns <= w.to {
				out = append(out, s)
				break
			}
		}
	}
	return out, true
}

// median returns the median of xs (xs is not changed); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	u := slices.Clone(xs)
	slices.Sort(u)
	if len(u)%2 == 1 {
		return u[len(u)/2]
	}
	return (u[len(u)/2-1] + u[len(u)/2]) / 2
}

// telemetry fills the temperature range and throttle share from the
// engine's telemetry of this step, when there is any: the samples of the
// GPU the results name (by UUID, through the hardware record), else of
// every GPU.
func (br *burnRun) telemetry() {
	d := br.d
	f, err := os.Open(filepath.Join(br.s.StepDir, telemetryFile))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.Notes = append(d.Notes, "telemetry not read: "+err.Error())
		}
		br.gpus(nil)
		return
	}
	defer f.Close()
	gpu := -1
	switch rec := br.s.Hardware; {
	case rec == nil:
		d.Notes = append(d.Notes, "telemetry of every GPU: no hardware record to find the results' device in")
	case d.DeviceUUID == "" && len(br.devices) > 0:
		d.Notes = append(d.Notes, fmt.Sprintf("telemetry of every GPU: the results list %d devices, one row each under gpus", len(br.devices)))
	case d.DeviceUUID == "":
		d.Notes = append(d.Notes, "telemetry of every GPU: the results name no device (device_uuid)")
	default:
		for _, g := range rec.GPUs {
			if strings.EqualFold(g.UUID, d.DeviceUUID) {
				gpu = g.Index
			}
		}
		if gpu < 0 {
			d.Notes = append(d.Notes, fmt.Sprintf("telemetry of every GPU: the hardware record has no GPU %s, which the results name", d.DeviceUUID))
		}
	}
	all := map[int]*gpuSamples{}
	var judged []gpuSample
	err = scanSamples(f, 0, func(l runtypes.TelemetryLine) {
		if all[l.GPU] == nil {
			all[l.GPU] = &gpuSamples{}
		}
		all[l.GPU].add(l)
		if gpu < 0 || l.GPU == gpu {
			g := gpuSamples{}
			g.add(l)
			judged = append(judged, g.all[0])
		}
	})
	if err != nil {
		d.Notes = append(d.Notes, "telemetry not fully read: "+err.Error())
	}
	br.gpus(all)
	st := statsOf(judged)
	if st.n == 0 {
		d.Notes = append(d.Notes, "telemetry holds no sample for this burn-in")
		return
	}
	if gpu >= 0 {
		d.TelemetryGPU = &gpu
	}
	d.TelemetrySamples = st.n
	d.TempMinC, d.TempMaxC = st.tmin, st.tmax
	d.ThrottleShare = ptrFloat(float64(st.throttled) / float64(st.n))
}

// gpus fills d.GPUs, one entry per burned-in GPU (the results' devices,
// or the GPU they name), with its telemetry (all of nil: none), and
// judges each GPU: its load and NVML utilization over the loop, its
// device memory trend, its burn throughput against its model's other
// GPUs and against itself over time, and its model's floors.
func (br *burnRun) gpus(all map[int]*gpuSamples) {
	d, rec := br.d, br.s.Hardware
	index := func(uuid string) *int {
		if rec == nil {
			return nil
		}
		for _, g := range rec.GPUs {
			if uuid != "" && strings.EqualFold(g.UUID, uuid) {
				i := g.Index
				return &i
			}
		}
		return nil
	}
	switch {
	case len(br.devices) > 0:
		for _, rd := range br.devices {
			g := BurninGPU{UUID: rd.UUID, Ordinal: ptrInt(rd.Ordinal), Index: index(rd.UUID), Error: rd.Error, Model: rd.Name}
			if s := rd.Sustained; s != nil {
				g.DutyCycle, g.Iterations, g.RepeatsChecked, g.Mismatches = ptrFloat(s.DutyCycle), s.Iterations, s.OutputsChecked, s.Mismatches
				if g.Error == "" {
					g.Error = s.Error
				}
			}
			d.GPUs = append(d.GPUs, g)
		}
	case d.DeviceUUID != "":
		d.GPUs = append(d.GPUs, BurninGPU{UUID: d.DeviceUUID, Index: index(d.DeviceUUID), Model: d.Device})
	default:
		return
	}
	simulated := rec != nil && rec.Simulated
	simIdle, windowless := false, false
	for k := range d.GPUs {
		g := &d.GPUs[k]
		if rec != nil && g.Index != nil {
			for _, rg := range rec.GPUs {
				if rg.Index == *g.Index {
					g.PowerLimitWatts = rg.PowerLimitWatts
					g.Model = rg.Name
				}
			}
		}
		if b := br.burns[strings.ToLower(g.UUID)]; b != nil {
			br.throughput(g, b)
		}
		if all == nil {
			continue
		}
		if g.Index == nil {
			d.Notes = append(d.Notes, fmt.Sprintf("GPU %s: not in the hardware record, no telemetry of it", g.UUID))
			continue
		}
		var samples []gpuSample
		if s := all[*g.Index]; s != nil {
			samples = s.all
		}
		whole := statsOf(samples)
		loop, ok := inLoop(samples, br.windowsOf(g.UUID))
		windowless = windowless || !ok
		st := statsOf(loop)
		g.Samples, g.LoopSamples = whole.n, st.n
		if whole.n > 0 {
			g.TempMinC, g.TempMaxC, g.PowerMaxWatts = whole.tmin, whole.tmax, whole.pmax
			g.ThrottleShare = ptrFloat(float64(whole.throttled) / float64(whole.n))
		}
		if st.n > 0 {
			g.PowerCappedShare = ptrFloat(float64(st.capped) / float64(st.n))
		}
		br.deviceLeak(g, st)
		if simulated && whole.n > 0 && !whole.busy() {
			// A simulated GPU that reports no load has no model of it (the
			// fake driver's kernels run on the host): its idle power and
			// utilization say nothing about the burn-in.
			simIdle = true
			br.floor(g, floors.MetricPower, nil, "SIMULATED GPU reports idle telemetry: not judged")
			continue
		}
		br.utilization(g, st)
		br.load(g, st)
	}
	if simIdle {
		d.Notes = append(d.Notes, "SIMULATED GPUs report idle telemetry (no utilization): power and NVML utilization not judged")
	}
	if windowless && all != nil {
		d.Notes = append(d.Notes, "the results give no loop window (loop_from_unix_ns): power, utilization and the memory trend are judged on every sample, the setup's too")
	}
	br.nodeThroughput()
}

// windowsOf returns the loop windows of the GPU with uuid: its own (a
// run over several devices), else the run's.
func (br *burnRun) windowsOf(uuid string) []loopWindow {
	if w := br.windows[strings.ToLower(uuid)]; len(w) > 0 {
		return w
	}
	return br.windows[""]
}

// MinCappedShare is the share of a burn-in loop's telemetry samples at
// the software power cap that counts a GPU as loaded to its limit,
// whatever its median power.
const MinCappedShare = 0.5

// load judges g's load on the cuda backend from its loop samples st: the
// median power over the loop must reach its model's power floor (85 % of
// the enforced limit: MinPowerShare where the model has no floor), or
// MinCappedShare of the samples must show the power cap holding it. A
// single sample at the cap, or a peak, no longer passes. A GPU whose
// power or limit NVML does not report is noted, and fails on a real GPU
// unless the step sets allowMissingReadings.
func (br *burnRun) load(g *BurninGPU, st sampleStats) {
	d := br.d
	if d.Backend != "cuda" {
		return
	}
	share, model := floors.Share(MinPowerShare), ""
	var floor *floors.Floor[floors.Share]
	if m, ok := floors.Lookup(g.Model); ok {
		f := m.Power
		floor, share, model = &f, f.Min, m.Name
	}
	if len(st.power) == 0 || g.PowerLimitWatts == nil || !(*g.PowerLimitWatts > 0) {
		what := "no power readings over the loop"
		if len(st.power) > 0 {
			what = "no enforced power limit in the hardware record"
		}
		br.missing(g, what+": its load is not judged")
		br.floor(g, floors.MetricPower, nil, what)
		return
	}
	med := median(st.power)
	g.PowerMedianWatts = &med
	capped := float64(st.capped) / float64(st.n)
	loaded := med >= float64(share)**g.PowerLimitWatts || capped >= MinCappedShare
	g.Loaded = &loaded
	measured := med / *g.PowerLimitWatts
	if floor != nil {
		br.applied(g, model, floors.MetricPower, float64(floor.Min), float64(floor.Peak), floors.Share(0).Unit(), floor.Source, &measured, loaded, "")
	} else {
		br.floor(g, floors.MetricPower, &measured, floors.NotJudged+fmt.Sprintf(" (the generic load rule, %.0f %% of the limit, applies)", 100*MinPowerShare))
	}
	if !loaded {
		br.failures = append(br.failures, fmt.Sprintf("gpu %s: median power %.0f W over the loop's %d samples is %.0f %% of its %.0f W limit, and the power cap held it in %.0f %% of them: the burn-in did not load the GPU (expected a median of at least %.0f %% of the limit, or the cap in at least %.0f %% of the samples)",
			gpuName(g), med, st.n, 100*measured, *g.PowerLimitWatts, 100*capped, 100*float64(share), 100*MinCappedShare))
	}
}

// missing notes a reading NVML does not give for g and, on a real GPU,
// fails the burn-in unless the step allows it.
func (br *burnRun) missing(g *BurninGPU, what string) {
	simulated := br.s.Hardware != nil && br.s.Hardware.Simulated
	note := fmt.Sprintf("gpu %s: %s", gpuName(g), what)
	switch {
	case simulated:
		br.d.Notes = append(br.d.Notes, note+" (SIMULATED)")
	case br.s.Step.AllowMissingReadings:
		br.d.Notes = append(br.d.Notes, note+" (allowMissingReadings)")
	default:
		br.failures = append(br.failures, note+"; hint: some VMs, vGPU and MIG do not report it; set allowMissingReadings: true on the step to accept that")
	}
}

// gpuName names g: "5 (GPU-...)", by NVML index when the record has it,
// else by CUDA ordinal.
func gpuName(g *BurninGPU) string {
	switch {
	case g.Index != nil:
		return fmt.Sprintf("%d (%s)", *g.Index, g.UUID)
	case g.Ordinal != nil:
		return fmt.Sprintf("ordinal %d (%s)", *g.Ordinal, g.UUID)
	}
	return g.UUID
}

// utilization records the median of g's NVML utilization samples over
// the loop and, on the cuda backend, fails a GPU whose median stays under
// MinNVMLUtilization: its kernels did not keep it busy, whatever the
// harness's duty cycle says. No utilization readings at all are noted,
// and fail on a real GPU unless the step allows it.
func (br *burnRun) utilization(g *BurninGPU, st sampleStats) {
	if len(st.util) == 0 {
		if br.d.Backend == "cuda" {
			br.missing(g, "no utilization readings over the loop: its NVML utilization is not judged")
		}
		return
	}
	med := median(st.util)
	g.Utilization, g.UtilizationSamples = ptrFloat(med), len(st.util)
	if br.d.Backend != "cuda" || len(st.util) < minUtilSamples || med >= MinNVMLUtilization {
		return
	}
	duty := "no duty cycle of its own"
	if g.DutyCycle != nil {
		duty = fmt.Sprintf("the harness reports a %.0f %% duty cycle", 100**g.DutyCycle)
	}
	br.failures = append(br.failures, fmt.Sprintf("gpu %s: NVML saw it busy a median %.0f %% of the time over %d samples (expected >= %.0f %%) while %s: the burn-in did not keep the GPU busy (hint: another process, a stalled host thread, or a harness that counts waiting as work)",
		gpuName(g), 100*med, len(st.util), 100*MinNVMLUtilization, duty))
}

// deviceLeak fits a line through g's NVML used-memory samples over the
// loop (the device's memory, not what the harness process sees of it),
// leaving out the first and last tenth, and fails a slope above the leak
// tolerance per sample.
func (br *burnRun) deviceLeak(g *BurninGPU, st sampleStats) {
	cut := max(1, len(st.mem)/10)
	if len(st.mem)-2*cut < minTrendIterations {
		return
	}
	mid := st.mem[cut : len(st.mem)-cut]
	ys := make([]float64, len(mid))
	for i, v := range mid {
		ys[i] = float64(v)
	}
	slope, ok := Slope(ys)
	if !ok {
		return
	}
	step := (len(mid) + maxTrendPoints - 1) / maxTrendPoints
	var kept []int64
	for i := 0; i < len(mid); i += step {
		kept = append(kept, mid[i])
	}
	g.DeviceMemory = &Trend{Series: kept, SlopePerIteration: &slope}
	if slope > float64(br.tol) {
		br.failures = append(br.failures, fmt.Sprintf("gpu %s: NVML's used device memory rises by %.0f bytes per telemetry sample over %d samples (tolerance %d): leak",
			gpuName(g), slope, len(mid), br.tol))
	}
}

// MinNodeThroughputShare is the share of its model's median burn
// throughput on the node a GPU must reach; MinLastWindowShare the share
// of its first window's throughput its last window must keep.
const (
	MinNodeThroughputShare = 0.90
	MinLastWindowShare     = 0.90
)

// maxThroughputWindow is the longest first and last window the burn's
// throughput is compared over (shorter when the loop is under three of
// them).
const maxThroughputWindow = 10 * time.Second

// throughput records g's burn throughput b and judges its last window
// against its first: a GPU that slows down by more than 10 % while it
// burns (heat, a failing fan, a power brake that telemetry missed) fails.
func (br *burnRun) throughput(g *BurninGPU, b *BurnThroughput) {
	g.BurnKernel, g.BurnTFLOPS = b.Kernel, ptrFloat(b.TFLOPS)
	if len(b.Windows) == 0 {
		return
	}
	end := b.Windows[len(b.Windows)-1].ToSeconds
	span := min(maxThroughputWindow.Seconds(), end/3)
	if span < b.WindowSeconds || span <= 0 {
		return
	}
	rate := func(in func(w BurnWindow) bool) (float64, bool) {
		var f, busy float64
		for _, w := range b.Windows {
			if in(w) {
				f, busy = f+w.Flops, busy+w.BusySeconds
			}
		}
		return f / busy / 1e12, busy > 0
	}
	first, ok1 := rate(func(w BurnWindow) bool { return w.ToSeconds <= span+1e-9 })
	last, ok2 := rate(func(w BurnWindow) bool { return w.FromSeconds >= end-span-1e-9 })
	if !ok1 || !ok2 {
		return
	}
	g.BurnFirstTFLOPS, g.BurnLastTFLOPS = &first, &last
	if last < MinLastWindowShare*first {
		br.failures = append(br.failures, fmt.Sprintf("gpu %s: the burn's last %.0f s ran at %.4g TFLOP/s, %.0f %% of its first %.0f s (%.4g TFLOP/s): the GPU slowed down while it burned (expected at least %.0f %%; hint: clocks, temperature and power in its telemetry rows)",
			gpuName(g), span, last, 100*last/first, span, first, 100*MinLastWindowShare))
	}
}

// nodeThroughput judges every GPU's burn throughput against the median
// of the GPUs of its model on the node (the burn is calibrated per GPU,
// so only its achieved work shows a slow one), and against its model's
// tensor floor.
func (br *burnRun) nodeThroughput() {
	d := br.d
	byModel := map[string][]float64{}
	for _, g := range d.GPUs {
		if g.BurnTFLOPS != nil && g.BurnKernel != "" {
			byModel[g.Model+"\x00"+g.BurnKernel] = append(byModel[g.Model+"\x00"+g.BurnKernel], *g.BurnTFLOPS)
		}
	}
	simulated := br.s.Hardware != nil && br.s.Hardware.Simulated
	for k := range d.GPUs {
		g := &d.GPUs[k]
		if g.BurnTFLOPS == nil {
			if d.Backend == "cuda" {
				br.floor(g, floors.MetricTensorFP16, nil, "no tensor-core burn throughput in the results")
			}
			continue
		}
		peers := byModel[g.Model+"\x00"+g.BurnKernel]
		med := median(peers)
		g.BurnNodeMedianTFLOPS = &med
		if len(peers) > 1 && *g.BurnTFLOPS < MinNodeThroughputShare*med {
			br.failures = append(br.failures, fmt.Sprintf("gpu %s: the burn ran at %.4g TFLOP/s, %.0f %% of the median of the node's %d %s GPUs (%.4g TFLOP/s): a slow GPU (expected at least %.0f %%; hint: its clocks in the telemetry rows, a throttle, a GPU at a lower clock)",
				gpuName(g), *g.BurnTFLOPS, 100**g.BurnTFLOPS/med, len(peers), orUnknown(g.Model), med, 100*MinNodeThroughputShare))
		}
		measured := *g.BurnTFLOPS * 1e12
		m, ok := floors.Lookup(g.Model)
		switch {
		case !ok:
			br.floor(g, floors.MetricTensorFP16, &measured, floors.NotJudged)
		case g.BurnKernel != "hmma":
			br.floor(g, floors.MetricTensorFP16, &measured, "the FFMA burn ran, not the tensor-core one: not judged")
		case simulated:
			br.applied(g, m.Name, floors.MetricTensorFP16, float64(m.TensorFP16.Min), float64(m.TensorFP16.Peak), floors.FLOPS(0).Unit(), m.TensorFP16.Source, &measured, true,
				"SIMULATED GPU: the fake driver's timing is the host's, not judged")
		default:
			pass := measured >= float64(m.TensorFP16.Min)
			br.applied(g, m.Name, floors.MetricTensorFP16, float64(m.TensorFP16.Min), float64(m.TensorFP16.Peak), floors.FLOPS(0).Unit(), m.TensorFP16.Source, &measured, pass, "")
			if !pass {
				br.failures = append(br.failures, fmt.Sprintf("gpu %s: the tensor-core burn ran at %v, under the %s floor of %v (%.0f %% of its %v peak, %s)",
					gpuName(g), floors.FLOPS(measured), m.Name, m.TensorFP16.Min, 100*float64(m.TensorFP16.Min)/float64(m.TensorFP16.Peak), m.TensorFP16.Peak, m.TensorFP16.Source.Name))
			}
		}
	}
}

// applied records a floor of g's model that was judged (passed or not);
// a note makes it "not judged" with the floor named.
func (br *burnRun) applied(g *BurninGPU, model string, metric floors.Metric, lo, peak float64, unit string, src floors.Source, measured *float64, pass bool, note string) {
	verdict := attest.FloorFailed
	switch {
	case note != "":
		verdict = attest.FloorNotJudged
	case pass:
		verdict = attest.FloorPassed
	}
	br.d.Floors = append(br.d.Floors, attest.AppliedFloor{Step: br.s.Step.ID, GPU: g.UUID, Model: model, Metric: string(metric), Min: lo, Peak: peak,
		Unit: unit, Measured: measured, Source: src.Name, SourceURL: src.URL, Verdict: verdict, Note: note})
}

// floor records a floor of g that was not judged, and why (for a known
// model, with its floor named).
func (br *burnRun) floor(g *BurninGPU, metric floors.Metric, measured *float64, why string) {
	m, ok := floors.Lookup(g.Model)
	if !ok {
		if why != floors.NotJudged && !strings.HasPrefix(why, floors.NotJudged) {
			why = floors.NotJudged + "; " + why
		}
		br.d.Floors = append(br.d.Floors, attest.AppliedFloor{Step: br.s.Step.ID, GPU: g.UUID, Metric: string(metric), Measured: measured,
			Verdict: attest.FloorNotJudged, Note: why})
		return
	}
	switch metric {
	case floors.MetricPower:
		f := m.Power
		br.applied(g, m.Name, metric, float64(f.Min), float64(f.Peak), f.Min.Unit(), f.Source, measured, false, why)
	case floors.MetricTensorFP16:
		f := m.TensorFP16
		br.applied(g, m.Name, metric, float64(f.Min), float64(f.Peak), f.Min.Unit(), f.Source, measured, false, why)
	case floors.MetricMemoryBandwidth:
		f := m.MemoryBandwidth
		br.applied(g, m.Name, metric, float64(f.Min), float64(f.Peak), f.Min.Unit(), f.Source, measured, false, why)
	}
}

func ptrInt(v int) *int { return &v }

func ptrFloat(v float64) *float64 { return &v }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func extOf(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 && !strings.ContainsRune(p[i:], '/') {
		return p[i:]
	}
	return ""
}
