package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// refStep is a benchmark of the stand-in harness against itself: the
// candidate's second case takes scale times as long as the reference's.
func refStep(scale string, edit func(*pipeline.Step)) pipeline.Step {
	st := pipeline.Step{ID: "bench", Kind: "benchmark", Run: sh(`"$HARNESS" cand.json ` + scale), Results: "cand.json",
		Reference: &pipeline.Reference{Run: sh(`"$HARNESS" ref.json 1`), Results: "ref.json"},
		Rounds:    pipeline.Rounds{N: 10}, Repeats: pipeline.Repeats{N: 15}, Seeds: []int{1, 2, 3},
		Gate: &pipeline.Gate{Threshold: pipeline.MustPercent("10%"), Alpha: 0.01}}
	if edit != nil {
		edit(&st)
	}
	return st
}

func TestBenchmarkReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		scale       string
		edit        func(*pipeline.Step)
		wantStatus  step.Status
		wantVerdict map[string]stats.Verdict
		wantReason  string
	}{
		{name: "identical sides", scale: "1", wantStatus: step.Passed, wantVerdict: map[string]stats.Verdict{"copy/n=1024": stats.Same, "scale/n=1024": stats.Same}},
		{name: "candidate 33% slower", scale: "1.33", wantStatus: step.Failed, wantVerdict: map[string]stats.Verdict{"copy/n=1024": stats.Same, "scale/n=1024": stats.Slower}, wantReason: "reference gate: scale/n=1024 SLOWER"},
		{name: "candidate faster", scale: "0.7", wantStatus: step.Passed, wantVerdict: map[string]stats.Verdict{"scale/n=1024": stats.Faster}},
		{name: "case only in the reference", scale: "1",
			edit: func(st *pipeline.Step) {
				st.Reference.Run = sh(`"$HARNESS" ref.json 1 && sed 's/"name":"copy/"name":"gone/' ref.json > ref.tmp && mv ref.tmp ref.json`)
			},
			wantStatus: step.Failed, wantVerdict: map[string]stats.Verdict{"copy/n=1024": stats.Missing, "gone/n=1024": stats.Missing}, wantReason: "MISSING (measured in the candidate but not in the reference)"},
		{name: "reference case fails", scale: "1", edit: func(st *pipeline.Step) { st.Reference.Run = sh(`"$HARNESS" ref.json 1 failed`) },
			wantStatus: step.Failed, wantReason: "reference case scale/n=1024 failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, refStep(tt.scale, tt.edit))
			out, err := Benchmark{Rand: rand.New(rand.NewPCG(1, 2))}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tt.wantStatus || !strings.Contains(out.Reason, tt.wantReason) {
				t.Errorf("status %s reason %q, want %s with %q", out.Status, out.Reason, tt.wantStatus, tt.wantReason)
			}
			d := out.Details.(*BenchmarkDetails)
			ref := d.Reference
			if ref == nil || ref.Report == nil {
				t.Fatalf("no reference report: %+v", d)
			}
			got := map[string]stats.Verdict{}
			for _, c := range ref.Report.Cases {
				got[c.Name] = c.Verdict
				if c.Verdict != stats.Missing && (c.Method != stats.MethodPaired || c.Pairs != 10 || c.SignedRank == nil) {
					t.Errorf("%s: method %q pairs %d", c.Name, c.Method, c.Pairs)
				}
			}
			for name, v := range tt.wantVerdict {
				if got[name] != v {
					t.Errorf("%s: verdict %s, want %s (all: %v)", name, got[name], v, got)
				}
			}
			// Ten rounds each, interleaved in ABBA blocks: every block has
			// both sides twice, and the i-th of each side are neighbours.
			if ref.Rounds != 10 || len(strings.ReplaceAll(ref.Order, " ", "")) != 20 {
				t.Errorf("rounds %d order %q", ref.Rounds, ref.Order)
			}
			for _, blk := range strings.Fields(ref.Order) {
				if blk != "RCCR" && blk != "CRRC" && blk != "RC" && blk != "CR" {
					t.Errorf("block %q is not ABBA", blk)
				}
			}
			var cands, refs int
			for _, f := range out.Results {
				switch {
				case strings.HasPrefix(f.Path, "steps/bench/candidate-"):
					cands++
				case strings.HasPrefix(f.Path, "steps/bench/reference-"):
					refs++
				}
			}
			if cands != 10 || refs != 10 {
				t.Errorf("results copied: %d candidate, %d reference, want 10 each", cands, refs)
			}
			if _, err := os.Stat(filepath.Join(s.StepDir, "benchmark.json")); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestBenchmarkReferenceJUnitAndCSV(t *testing.T) {
	t.Parallel()
	s := newContext(t, refStep("1.33", nil))
	out, err := Benchmark{Rand: rand.New(rand.NewPCG(3, 4))}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	j, err := os.ReadFile(filepath.Join(s.StepDir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `failures="1"`) || !strings.Contains(string(j), "reference SLOWER: slower by") {
		t.Errorf("junit lacks the verdicts:\n%s", j)
	}
	csv, _ := os.ReadFile(filepath.Join(s.StepDir, "samples.csv"))
	if !strings.Contains(string(csv), ",reference\n") || !strings.Contains(string(csv), ",candidate\n") {
		t.Errorf("samples.csv lacks the sides")
	}
	// run.json's details carry no raw samples; benchmark.json does.
	d := out.Details.(*BenchmarkDetails)
	if len(d.Cases[0].SamplesNS) != 0 || len(d.Reference.Cases[0].SamplesNS) != 0 {
		t.Error("details carry raw samples")
	}
	set, err := LoadSampleSet(filepath.Join(s.StepDir, "benchmark.json"), "benchmark")
	if err != nil || len(set.Cases) != 2 || len(set.Cases[0].SamplesNS) != 10*15*1 {
		t.Errorf("benchmark.json: %v %+v", err, set)
	}
}

func TestABBAOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for rounds := 2; rounds <= 13; rounds++ {
		o := abbaOrder(rounds, r)
		if len(o) != 2*rounds {
			t.Fatalf("rounds %d: %d invocations", rounds, len(o))
		}
		var c, ref int
		for i := 0; i < len(o); i += 2 {
			if o[i] == o[i+1] {
				t.Fatalf("rounds %d: invocations %d and %d are the same side: %s", rounds, i, i+1, orderString(o))
			}
		}
		for _, v := range o {
			if v {
				c++
			} else {
				ref++
			}
		}
		if c != rounds || ref != rounds {
			t.Errorf("rounds %d: %d candidate, %d reference", rounds, c, ref)
		}
	}
}

var (
	spinOnce sync.Once
	spinBin  string
	spinErr  error
)

// buildSpin compiles testdata/spin, a real CPU workload of a given size.
func buildSpin(t *testing.T) string {
	t.Helper()
	spinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpuattest-spin-")
		if err != nil {
			spinErr = err
			return
		}
		spinBin = filepath.Join(dir, "spin")
		out, err := exec.Command("go", "build", "-o", spinBin, "./testdata/spin").CombinedOutput()
		if err != nil {
			spinErr = err
			spinBin = string(out)
		}
	})
	if spinErr != nil {
		t.Fatalf("building testdata/spin: %v\n%s", spinErr, spinBin)
	}
	return spinBin
}

// loadMachine runs n busy processes (yes > /dev/null) until the test ends.
func loadMachine(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var cmds []*exec.Cmd
	for range n {
		c := exec.CommandContext(ctx, "yes")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	t.Cleanup(func() {
		cancel()
		for _, c := range cmds {
			_ = c.Wait()
		}
	})
}

// TestReferenceGateOnRealWork runs a real CPU workload against itself and
// against a reference doing 25 % less work, quiet and with two busy
// processes competing for the cores: identical sides must come out SAME
// in at least 19 of 20 repetitions, the lighter reference SLOWER every
// time. This is the acceptance test of the same-run gate; it compares
// within one run, so it holds on any machine.
//
// It measures timings, so it runs alone: make test runs it after the rest
// with GPUATTEST_REALWORK=1, and go test ./... skips it, because other
// packages' tests running beside it are a load it does not control.
func TestReferenceGateOnRealWork(t *testing.T) {
	if os.Getenv("GPUATTEST_REALWORK") != "1" {
		t.Skip("runs alone, after the other tests: GPUATTEST_REALWORK=1 go test -run TestReferenceGateOnRealWork ./pipeline/suite (make test does)")
	}
	spin := buildSpin(t)
	for _, load := range []int{0, 2} {
		name := "quiet"
		if load > 0 {
			name = "loaded"
		}
		t.Run(name, func(t *testing.T) {
			if load > 0 {
				loadMachine(t, load)
			}
			var same, slower int
			var reasons []string
			const reps, slowReps = 20, 5
			for i := range reps + slowReps {
				refWork := "50000"
				if i >= reps {
					refWork = "37500" // 25 % less work than the candidate
				}
				st := pipeline.Step{ID: "bench", Kind: "benchmark", Results: "cand.json",
					Run:       pipeline.Command{Argv: []string{spin, "-work", "50000", "-out", "cand.json"}},
					Reference: &pipeline.Reference{Run: pipeline.Command{Argv: []string{spin, "-work", refWork, "-out", "ref.json"}}, Results: "ref.json"},
					Warmup:    ptrInt(3), Repeats: pipeline.Repeats{N: 200}, Gate: &pipeline.Gate{Threshold: pipeline.MustPercent("10%"), Alpha: 0.01}}
				s := newContext(t, st)
				out, err := Benchmark{}.Execute(t.Context(), s)
				if err != nil {
					t.Fatal(err)
				}
				c := out.Details.(*BenchmarkDetails).Reference.Report.Cases[0]
				switch {
				case i < reps && c.Verdict == stats.Same:
					same++
				case i >= reps && c.Verdict == stats.Slower:
					slower++
				default:
					reasons = append(reasons, string(c.Verdict)+": "+c.Reason)
				}
			}
			t.Logf("%s: identical sides SAME %d/%d; 25%% lighter reference SLOWER %d/%d", name, same, reps, slower, slowReps)
			if same < 19 || slower < slowReps {
				t.Errorf("%s: SAME %d/%d (want ≥ 19), SLOWER %d/%d (want all)\n%s", name, same, reps, slower, slowReps, strings.Join(reasons, "\n"))
			}
		})
	}
}

// TestBenchmarkAutoRepeats checks repeats: auto's plumbing and that the
// suite's stop reasons are not taken on trust.
func TestBenchmarkAutoRepeats(t *testing.T) {
	t.Parallel()
	// env prints what the suite was asked for; the case's samples and stop
	// come from the test.
	suiteJSON := func(samples, stop string) string {
		return `env | grep ^GPUATTEST_ | sort > env.txt; echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"k","status":"passed","samples_ns":[` + samples + `]` + stop + `}]}' > r.json`
	}
	tight := "1000,1001,1000,1002,999,1000,1001,1000,1000,999,1001,1000"
	loose := "1000,1500,800,1200,900,1300,700,1100,1000,1400,600,1250"
	tests := []struct {
		name       string
		run        string
		wantStatus step.Status
		wantReason string
		wantStops  map[string]int
	}{
		{"precision reached", suiteJSON(tight, `,"stop":{"reason":"precision","elapsed_s":0.1}`), step.Passed, "", map[string]int{"precision": 1}},
		{"time limit", suiteJSON(loose, `,"stop":{"reason":"max_time","elapsed_s":120}`), step.Passed, "", map[string]int{"max_time": 1}},
		{"claimed precision the samples do not show", suiteJSON(loose, `,"stop":{"reason":"precision","elapsed_s":0.1}`), step.Failed, "claims the precision was reached (invocation 1), but its 12 samples give", nil},
		{"suite ignores auto", suiteJSON(tight, ""), step.Failed, "reports no stop reason (invocation 1): the suite does not honour GPUATTEST_REPEATS=auto", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, pipeline.Step{ID: "b", Kind: "benchmark", Run: sh(tt.run), Results: "r.json",
				Repeats: pipeline.Repeats{Auto: true}, Precision: pipeline.MustPercent("1%"), MaxTime: pipeline.MustDuration("2m")})
			out, err := Benchmark{}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tt.wantStatus || !strings.Contains(out.Reason, tt.wantReason) {
				t.Errorf("status %s reason %q, want %s with %q", out.Status, out.Reason, tt.wantStatus, tt.wantReason)
			}
			d := out.Details.(*BenchmarkDetails)
			sp := d.Cases[0].Sampling
			if sp == nil || sp.Samples != 12 {
				t.Fatalf("sampling %+v", sp)
			}
			for k, v := range tt.wantStops {
				if sp.Stops[k] != v {
					t.Errorf("stops %v, want %s=%d", sp.Stops, k, v)
				}
			}
			if d.Repeats != "auto" || d.Precision != 0.01 || d.MaxTime != "2m0s" {
				t.Errorf("details repeats %q precision %v max time %q", d.Repeats, d.Precision, d.MaxTime)
			}
			env, _ := os.ReadFile(filepath.Join(s.WorkDir, "env.txt"))
			for _, w := range []string{"GPUATTEST_REPEATS=auto", "GPUATTEST_PRECISION=0.01", "GPUATTEST_MAX_TIME=120", "GPUATTEST_MIN_REPEATS=10"} {
				if !strings.Contains(string(env), w+"\n") {
					t.Errorf("suite environment lacks %s:\n%s", w, env)
				}
			}
		})
	}
}

// Recheck re-derives a recorded benchmark verdict from the copies in the
// step directory: it agrees with the executor, and refuses copies whose
// digest differs from the record or whose content no longer passes.
func TestRecheckBenchmark(t *testing.T) {
	t.Parallel()
	for _, st := range []pipeline.Step{refStep("1", nil), benchStep("seeds", "1", nil)} {
		t.Run(st.ID, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, st)
			out, err := Benchmark{Rand: rand.New(rand.NewPCG(5, 5))}.Execute(t.Context(), s)
			if err != nil || out.Status != step.Passed {
				t.Fatalf("benchmark: %v %+v", err, out)
			}
			if err := Recheck(s, out.Results, out.ExitCode); err != nil {
				t.Fatalf("recheck of an untouched run: %v", err)
			}
			// A results copy edited: its digest no longer matches.
			var victim step.File
			for _, f := range out.Results {
				if f.Kind == "results" {
					victim = f
					break
				}
			}
			p := filepath.Join(s.StepDir, filepath.Base(victim.Path))
			orig, _ := os.ReadFile(p)
			slow := strings.ReplaceAll(string(orig), `"status":"passed"`, `"status":"failed"`)
			if err := os.WriteFile(p, []byte(slow), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := Recheck(s, out.Results, out.ExitCode); err == nil || !strings.Contains(err.Error(), "but run.json records") {
				t.Errorf("edited copy: %v", err)
			}
			// The same edit with its digest recorded too: the verdict itself
			// no longer holds.
			sum := sha256.Sum256([]byte(slow))
			forged := slices.Clone(out.Results)
			for i := range forged {
				if forged[i].Path == victim.Path {
					forged[i].SHA256 = hex.EncodeToString(sum[:])
				}
			}
			if err := Recheck(s, forged, out.ExitCode); err == nil || !strings.Contains(err.Error(), "its results say failed") {
				t.Errorf("forged copy and digest: %v", err)
			}
		})
	}
}

// TestBenchmarkReleaseNeedsFetcher: a reference naming a published release
// is never run unverified: without a release fetcher the step is an error
// before either side runs.
func TestBenchmarkReleaseNeedsFetcher(t *testing.T) {
	t.Parallel()
	s := newContext(t, refStep("1", func(st *pipeline.Step) {
		st.Reference.Release, st.Reference.Key = "oci-layout:releases/v1", "release.pub"
	}))
	_, err := Benchmark{}.Execute(t.Context(), s)
	if err == nil || !strings.Contains(err.Error(), "no release fetcher") {
		t.Fatalf("err = %v, want no release fetcher", err)
	}
	for _, f := range []string{"cand.json", "ref.json"} {
		if _, err := os.Stat(filepath.Join(s.WorkDir, f)); err == nil {
			t.Errorf("%s was written: a side ran", f)
		}
	}
}

// noisyCand is a candidate command whose second case's scale cycles
// through a wide spread around 1, invocation by invocation (a counter in
// the working directory), so that the pairs cannot tell a 10 % change.
const noisyCand = `n=$(cat cnt 2>/dev/null || echo 0); echo $((n+1)) > cnt; ` +
	`set -- 0.7 1.3 0.8 1.25 0.75 1.2 0.9 1.15; shift $((n % 8)); "$HARNESS" cand.json $1`

func TestBenchmarkRoundsAuto(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		scale       string
		edit        func(*pipeline.Step)
		wantStatus  step.Status
		wantVerdict stats.Verdict
		wantStop    string
		wantReason  []string
		wantWarning string
	}{
		{name: "slower is decided early", scale: "1.33", wantStatus: step.Failed, wantVerdict: stats.Slower, wantStop: StopDecided,
			wantReason: []string{"reference gate: scale/n=1024 SLOWER"}},
		{name: "identical is decided early", scale: "1", wantStatus: step.Passed, wantVerdict: stats.Same, wantStop: StopDecided},
		{name: "ambiguous at the end of the budget fails by default", scale: "1",
			edit:       func(st *pipeline.Step) { st.Run, st.MaxRounds = sh(noisyCand), 24 },
			wantStatus: step.Failed, wantVerdict: stats.Ambiguous, wantStop: StopMaxRounds,
			wantReason: []string{"reference gate: scale/n=1024 AMBIGUOUS", "more pairs"}},
		{name: "too few pairs for any verdict fails", scale: "1.33",
			edit:       func(st *pipeline.Step) { st.MaxRounds = 4 },
			wantStatus: step.Failed, wantVerdict: stats.Ambiguous, wantStop: StopMaxRounds,
			wantReason: []string{"AMBIGUOUS (too few pairs", "hint: raise maxRounds"}},
		{name: "onAmbiguous warn passes with a warning", scale: "1",
			edit: func(st *pipeline.Step) {
				st.Run, st.MaxRounds, st.Gate.OnAmbiguous = sh(noisyCand), 24, pipeline.OnAmbiguousWarn
			},
			wantStatus: step.Passed, wantVerdict: stats.Ambiguous, wantStop: StopMaxRounds,
			wantWarning: "reference gate: case scale/n=1024 AMBIGUOUS, passed under gate.onAmbiguous: warn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := refStep(tt.scale, func(st *pipeline.Step) {
				st.Rounds, st.MaxRounds, st.Gate.OnAmbiguous = pipeline.Rounds{Auto: true}, 200, pipeline.OnAmbiguousFail
				if tt.edit != nil {
					tt.edit(st)
				}
			})
			s := newContext(t, st)
			var mu sync.Mutex
			var progress []runtypes.Progress
			s.Progress = func(p runtypes.Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() }
			out, err := Benchmark{Rand: rand.New(rand.NewPCG(1, 2))}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.wantReason {
				if !strings.Contains(out.Reason, w) {
					t.Errorf("reason %q lacks %q", out.Reason, w)
				}
			}
			if out.Status != tt.wantStatus {
				t.Errorf("status %s, want %s (reason %q)", out.Status, tt.wantStatus, out.Reason)
			}
			if tt.wantWarning == "" && len(out.Warnings) > 0 || tt.wantWarning != "" && !slices.ContainsFunc(out.Warnings, func(w string) bool { return strings.Contains(w, tt.wantWarning) }) {
				t.Errorf("warnings %q, want %q", out.Warnings, tt.wantWarning)
			}
			ref := out.Details.(*BenchmarkDetails).Reference
			seq := ref.Sequential
			if seq == nil || seq.Stop != tt.wantStop || ref.Rounds > st.MaxRounds || ref.Rounds != len(strings.ReplaceAll(ref.Order, " ", ""))/2 {
				t.Fatalf("sequential %+v after %d rounds, want stop %s", seq, ref.Rounds, tt.wantStop)
			}
			var v stats.Verdict
			for _, c := range ref.Report.Cases {
				if c.Name == "scale/n=1024" {
					v = c.Verdict
					if c.Method != stats.MethodSequential || c.Sequential == nil {
						t.Errorf("method %q", c.Method)
					}
				}
			}
			if v != tt.wantVerdict {
				t.Errorf("verdict %s, want %s", v, tt.wantVerdict)
			}
			if tt.wantStop == StopDecided && ref.Rounds >= 30 {
				t.Errorf("decided after %d rounds: no quicker than the old fixed 30", ref.Rounds)
			}
			// Progress names the rounds, the budget and, while a case is
			// undecided, its interval against the threshold.
			mu.Lock()
			defer mu.Unlock()
			last := progress[len(progress)-1]
			if last.Rounds != ref.Rounds || last.MaxRounds != st.MaxRounds || last.GateThreshold != 0.10 || last.TimeLeft <= 0 {
				t.Errorf("last progress %+v after %d rounds", last, ref.Rounds)
			}
			if tt.wantVerdict == stats.Ambiguous && (last.Undecided == 0 || last.GateCase == "") {
				t.Errorf("last progress %+v: want the undecided case", last)
			}
		})
	}
}

func TestBenchmarkRoundsAutoTimeBudget(t *testing.T) {
	t.Parallel()
	st := refStep("1", func(st *pipeline.Step) {
		st.Rounds, st.MaxRounds, st.RoundsTime = pipeline.Rounds{Auto: true}, 200, pipeline.MustDuration("1ms")
		st.Run = sh(noisyCand)
	})
	s := newContext(t, st)
	out, err := Benchmark{Rand: rand.New(rand.NewPCG(1, 2))}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	ref := out.Details.(*BenchmarkDetails).Reference
	if ref.Sequential.Stop != StopTime || ref.Rounds != 2 || out.Status != step.Failed || !strings.Contains(out.Reason, "AMBIGUOUS") {
		t.Errorf("1ms budget: %+v after %d rounds, status %s %q", ref.Sequential, ref.Rounds, out.Status, out.Reason)
	}
}

// TestBenchmarkRoundsAutoStepTimeout: the step's timeout (its context's
// deadline) bounds rounds: auto too, with room left for a block: sampling
// stops by itself before the deadline and the step is judged.
func TestBenchmarkRoundsAutoStepTimeout(t *testing.T) {
	t.Parallel()
	st := refStep("1", func(st *pipeline.Step) {
		st.Rounds, st.MaxRounds = pipeline.Rounds{Auto: true}, 2000
		st.Run = sh(noisyCand)
	})
	s := newContext(t, st)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := Benchmark{Rand: rand.New(rand.NewPCG(1, 2))}.Execute(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	ref := out.Details.(*BenchmarkDetails).Reference
	if ref.Sequential.Stop != StopTime || ctx.Err() != nil || !strings.Contains(out.Reason, "AMBIGUOUS") {
		t.Errorf("10s timeout: %+v after %d rounds, context %v, reason %q", ref.Sequential, ref.Rounds, ctx.Err(), out.Reason)
	}
}
