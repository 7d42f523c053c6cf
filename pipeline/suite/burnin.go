package suite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// DefaultLeakTolerance is the largest memory slope a burn-in accepts, in
// bytes per iteration, when the step sets no leakTolerance.
const DefaultLeakTolerance = 1 << 20

// minTrendIterations is the fewest iterations a memory slope is judged on.
const minTrendIterations = 3

// Burnin executes burnin steps: the suite runs again and again, each
// iteration a full run, until the step's duration has elapsed. It fails
// on any failing iteration, on outputs that differ between iterations
// (per-case output_sha256), on a memory trend (least-squares slope of the
// per-iteration host max RSS, or of the device memory the cases report)
// beyond the leak tolerance, and on being cut short: a burn-in shorter than
// asked is a failure, never a pass.
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
	// Iterations is the number of full runs.
	Iterations int `json:"iterations"`
	// IterationSeconds is the wall time of each iteration, in order.
	IterationSeconds []float64 `json:"iteration_s,omitempty"`
	// Cases is the number of cases per iteration; OutputsChecked how many
	// of them report an output digest compared across iterations.
	Cases          int `json:"cases"`
	OutputsChecked int `json:"outputs_checked"`
	// Mismatches lists output digests that changed.
	Mismatches []string `json:"mismatches,omitempty"`
	// HostRSS is the trend of the per-iteration peak host RSS.
	HostRSS *Trend `json:"host_rss,omitempty"`
	// DeviceMemory is the trend of the largest device_memory_used_bytes
	// the cases report per iteration (cuda backend).
	DeviceMemory *Trend `json:"device_memory,omitempty"`
	// LeakToleranceBytes is the largest slope accepted, bytes per iteration.
	LeakToleranceBytes int64 `json:"leak_tolerance_bytes"`
	// FailedIteration is the 1-based iteration that failed, if any.
	FailedIteration int `json:"failed_iteration,omitempty"`
	// TempMinC, TempMaxC and ThrottleShare come from telemetry; the engine
	// fills them when it samples the GPU around the step.
	TempMinC      *float64 `json:"temp_min_c,omitempty"`
	TempMaxC      *float64 `json:"temp_max_c,omitempty"`
	ThrottleShare *float64 `json:"throttle_share,omitempty"`
	// Notes are facts worth reading (e.g. no output digests to compare).
	Notes []string `json:"notes,omitempty"`
}

// Trend is a least-squares line through a per-iteration series.
type Trend struct {
	// Series are the per-iteration values (bytes).
	Series []int64 `json:"series"`
	// SlopePerIteration is the fitted slope in bytes per iteration; nil
	// when there are too few points.
	SlopePerIteration *float64 `json:"slope_bytes_per_iteration,omitempty"`
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

// Execute runs the burnin step s.Step.
func (b Burnin) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	now := b.Now
	if now == nil {
		now = time.Now
	}
	want := s.Step.Duration.Value()
	if want <= 0 {
		return nil, fmt.Errorf("step %s: duration %q: expected a positive duration such as 30s or 1h", s.Step.ID, s.Step.Duration)
	}
	tol := int64(DefaultLeakTolerance)
	if s.Step.LeakTolerance != "" {
		v, err := pipeline.ParseSize(s.Step.LeakTolerance)
		if err != nil {
			return nil, fmt.Errorf("step %s: leakTolerance: %w", s.Step.ID, err)
		}
		tol = v
	}
	resFile, err := resultsFile(s)
	if err != nil {
		return nil, err
	}
	var env []string
	if s.Step.Warmup > 0 {
		env = append(env, "GPUATTEST_WARMUP="+strconv.Itoa(s.Step.Warmup))
	}
	if s.Step.Repeats.N > 0 {
		env = append(env, "GPUATTEST_REPEATS="+strconv.Itoa(s.Step.Repeats.N))
	}
	if len(s.Step.Seeds) > 0 {
		env = append(env, "GPUATTEST_SEED="+strconv.Itoa(s.Step.Seeds[0]))
	}
	d := &BurninDetails{Requested: want.String(), LeakToleranceBytes: tol}
	out := &step.Outcome{Status: step.Passed, Details: d}
	var (
		first    map[string]string // case -> output digest of iteration 1
		caseSet  []string
		rss      []int64
		devMem   []int64
		sawDev   bool
		failures []string
		lastRes  []byte // the results file as last read, once iteration 1 parsed
		lastRead []byte
	)
	start := now()
	fail := func(iter int, format string, args ...any) {
		if d.FailedIteration == 0 {
			d.FailedIteration = iter
		}
		failures = append(failures, fmt.Sprintf("iteration %d: ", iter)+fmt.Sprintf(format, args...))
	}
loop:
	for iter := 1; ; iter++ {
		if iter > 1 && now().Sub(start) >= want {
			break
		}
		if err := resFile.remove(); err != nil {
			return nil, err
		}
		iterStart := now()
		res, err := runStep(ctx, s, env...)
		if err != nil {
			if ctx.Err() != nil {
				d.Elapsed = now().Sub(start).Round(time.Millisecond).String()
				failures = append(failures, fmt.Sprintf("cut short after %s of %s in iteration %d: %v", d.Elapsed, want, iter, context.Cause(ctx)))
				break loop
			}
			return nil, err
		}
		out.ExitCode = exitPtr(res)
		d.Iterations = iter
		d.IterationSeconds = append(d.IterationSeconds, now().Sub(iterStart).Seconds())
		rss = append(rss, res.MaxRSSBytes)
		r, b, err := readResults(resFile, s.Step.Format)
		if b != nil {
			lastRead = b
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil, err
			}
			fail(iter, "results: %s", firstLine(err.Error()))
			break
		}
		if iter == 1 {
			lastRes = b
		}
		if res.ExitCode != 0 {
			fail(iter, "command exited %d", res.ExitCode)
		}
		var dm int64
		names := make([]string, 0, len(r.Cases))
		digests := map[string]string{}
		for _, c := range r.Cases {
			names = append(names, c.Name)
			if c.Status == StatusFailed || c.Status == StatusError {
				msg := ""
				if c.Message != "" {
					msg = ": " + firstLine(c.Message)
				}
				fail(iter, "case %s %s%s", c.Name, c.Status, msg)
			}
			if c.OutputSHA256 != "" {
				digests[c.Name] = c.OutputSHA256
			}
			if c.DeviceMemoryUsedBytes > 0 {
				sawDev = true
				dm = max(dm, c.DeviceMemoryUsedBytes)
			}
		}
		devMem = append(devMem, dm)
		if len(r.Cases) == 0 {
			fail(iter, "results hold no case")
		}
		if iter == 1 {
			first, caseSet = digests, names
			d.Cases, d.OutputsChecked = len(names), len(digests)
		} else {
			if strings.Join(names, "\x00") != strings.Join(caseSet, "\x00") {
				fail(iter, "the set of cases changed (%d cases, first iteration had %d)", len(names), len(caseSet))
			}
			for name, want := range first {
				if got := digests[name]; got != want {
					if got == "" {
						got = "none"
					}
					d.Mismatches = append(d.Mismatches, fmt.Sprintf("iteration %d: %s output %s, iteration 1 %s", iter, name, short(got), short(want)))
				}
			}
			if len(d.Mismatches) > 0 {
				fail(iter, "outputs differ from iteration 1: %s", d.Mismatches[0])
			}
		}
		s.Report(step.Progress{Iterations: iter, Errors: len(failures)})
		if len(failures) > 0 {
			break
		}
	}
	elapsed := now().Sub(start)
	if d.Elapsed == "" {
		d.Elapsed = elapsed.Round(time.Millisecond).String()
	}
	if lastRes != nil {
		if f, err := writeBytesToStep(s, "results-last"+extOf(resFile.rel), "results", lastRead); err == nil {
			out.Results = append(out.Results, f)
		}
	}
	if d.Iterations > 0 && d.OutputsChecked == 0 {
		d.Notes = append(d.Notes, "no case reports output_sha256: output consistency was not checked")
	}
	if d.Iterations > 0 && d.Iterations < minTrendIterations {
		d.Notes = append(d.Notes, fmt.Sprintf("%d iterations: too few to judge a memory trend (need %d)", d.Iterations, minTrendIterations))
	}
	var anyRSS bool
	for _, v := range rss {
		anyRSS = anyRSS || v > 0
	}
	if anyRSS {
		d.HostRSS = trend(rss)
		if sl := d.HostRSS.SlopePerIteration; sl != nil && *sl > float64(tol) {
			failures = append(failures, fmt.Sprintf("host RSS rises by %.0f bytes per iteration (tolerance %d): leak", *sl, tol))
		}
	} else if d.Iterations > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("the %s runner does not report peak RSS: host memory trend not checked", s.Runner.Name()))
	}
	if sawDev {
		d.DeviceMemory = trend(devMem)
		if sl := d.DeviceMemory.SlopePerIteration; sl != nil && *sl > float64(tol) {
			failures = append(failures, fmt.Sprintf("device memory rises by %.0f bytes per iteration (tolerance %d): leak", *sl, tol))
		}
	}
	if len(failures) == 0 && elapsed < want {
		failures = append(failures, fmt.Sprintf("ran %s of the %s asked: a burn-in shorter than asked is a failure", d.Elapsed, want))
	}
	d.Completed = len(failures) == 0
	if len(failures) > 0 {
		out.Status = step.Failed
		out.Reason = "burn-in " + strings.Join(failures, "; ")
		return out, nil
	}
	out.Reason = fmt.Sprintf("%d iterations in %s, outputs of %d cases identical", d.Iterations, d.Elapsed, d.OutputsChecked)
	return out, nil
}

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
