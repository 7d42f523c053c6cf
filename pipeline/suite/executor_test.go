package suite

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// newContext builds a step context that runs st on the host runner in a
// fresh work dir, with a run directory laid out as the engine does.
func newContext(t *testing.T, st pipeline.Step) *step.Context {
	t.Helper()
	root := t.TempDir()
	wd := filepath.Join(root, "work")
	run := filepath.Join(root, "run")
	sd := filepath.Join(run, "steps", st.ID)
	for _, d := range []string{wd, sd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &step.Context{
		Pipeline: &pipeline.Pipeline{Name: "t", Dir: wd, Steps: []pipeline.Step{st}},
		Step:     &st,
		Runner:   &runner.Host{},
		WorkDir:  wd,
		StepDir:  sd,
		Env:      []string{"PATH=" + os.Getenv("PATH"), "HARNESS=" + harness(t)},
		Stdout:   io.Discard,
		Stderr:   io.Discard,
		Logger:   slog.New(slog.DiscardHandler),
	}
}

func harness(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("testdata/harness.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sh(s string) pipeline.Command { return pipeline.Command{Shell: s} }

const goodJSON = `{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed"},{"name":"b","status":"passed"}]}`

func TestTestExecutor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		run        string
		results    string
		stale      bool
		wantStatus step.Status
		wantErr    string
		wantReason []string
	}{
		{"all passed", `echo '` + goodJSON + `' > r.json`, "r.json", false, step.Passed, "", []string{"2 cases: 2 passed"}},
		{"exit 0 but a case failed", `echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed"},{"name":"b","status":"failed","message":"max abs error 0.5"}]}' > r.json`,
			"r.json", false, step.Failed, "", []string{"1 failed", "b failed: max abs error 0.5"}},
		{"errored case", `echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"error","message":"cuda OOM"}]}' > r.json`,
			"r.json", false, step.Failed, "", []string{"1 errored", "a error: cuda OOM"}},
		{"results pass but exit 1", `echo '` + goodJSON + `' > r.json; exit 1`, "r.json", false, step.Failed, "", []string{"command exited 1"}},
		{"skips are counted", `echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed"},{"name":"b","status":"skipped","message":"needs sm_90"}]}' > r.json`,
			"r.json", false, step.Passed, "", []string{"1 skipped"}},
		{"all skipped", `echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"skipped"}]}' > r.json`,
			"r.json", false, step.Failed, "", []string{"every case was skipped"}},
		{"junit failure", `printf '<testsuite><testcase name="x"/><testcase name="y"><failure message="boom"/></testcase></testsuite>' > out/j.xml`,
			"out/j.xml", false, step.Failed, "", []string{"y failed: boom"}},
		{"missing results", `true`, "r.json", false, "", "does not exist", nil},
		{"stale results are not reused", `true`, "r.json", true, "", "does not exist", nil},
		{"invalid results", `echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"gpu","cases":[]}' > r.json`, "r.json", false, "", `backend: "gpu": expected cuda or cpu`, nil},
		{"no cases", `echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[]}' > r.json`, "r.json", false, "", "hold no case", nil},
		{"crash without results", `exit 3`, "r.json", false, "", "exited 3", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, pipeline.Step{ID: "t", Kind: "test", Run: sh("mkdir -p out; " + tt.run), Results: tt.results})
			if tt.stale {
				if err := os.WriteFile(filepath.Join(s.WorkDir, tt.results), []byte(goodJSON), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := Test{}.Execute(t.Context(), s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tt.wantStatus {
				t.Errorf("status %s (%s), want %s", out.Status, out.Reason, tt.wantStatus)
			}
			for _, w := range tt.wantReason {
				if !strings.Contains(out.Reason, w) {
					t.Errorf("reason %q does not contain %q", out.Reason, w)
				}
			}
			if len(out.Results) != 1 || out.Results[0].Path != tt.results || len(out.Results[0].SHA256) != 64 {
				t.Errorf("results %+v", out.Results)
			}
			if _, err := os.Stat(filepath.Join(s.StepDir, "results"+filepath.Ext(tt.results))); err != nil {
				t.Errorf("results not copied into the step dir: %v", err)
			}
			if _, ok := out.Details.(*TestDetails); !ok {
				t.Errorf("details %T", out.Details)
			}
		})
	}
}

func benchStep(id string, scale string, extra func(*pipeline.Step)) pipeline.Step {
	st := pipeline.Step{ID: id, Kind: "benchmark", Run: sh(`"$HARNESS" out.json ` + scale), Results: "out.json", Warmup: ptrInt(2), Repeats: pipeline.Repeats{N: 15}, Seeds: []int{1, 2}}
	if extra != nil {
		extra(&st)
	}
	return st
}

func TestBenchmarkExecutor(t *testing.T) {
	t.Parallel()
	s := newContext(t, benchStep("bench", "1", nil))
	s.Step.Run = sh(`echo "$GPUATTEST_WARMUP $GPUATTEST_REPEATS $GPUATTEST_SEED" >> env.log; "$HARNESS" out.json`)
	out, err := Benchmark{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != step.Passed {
		t.Fatalf("status %s: %s", out.Status, out.Reason)
	}
	env, _ := os.ReadFile(filepath.Join(s.WorkDir, "env.log"))
	if string(env) != "2 15 1\n2 15 2\n" {
		t.Errorf("the harness saw env %q", env)
	}
	d := out.Details.(*BenchmarkDetails)
	if len(d.Cases) != 2 || d.Cases[0].Name != "copy/n=1024" {
		t.Fatalf("cases %+v", d.Cases)
	}
	c := d.Cases[0]
	if c.Stats == nil || c.Stats.N != 30 || c.SamplesNS != nil {
		t.Fatalf("case %+v: want 30 merged samples and none in Details", c)
	}
	if c.Stats.Median < 950 || c.Stats.Median > 1050 || c.Stats.CV > 0.05 {
		t.Errorf("stats %+v", c.Stats)
	}
	if want := 1024 / c.Stats.Median; c.GFLOPS != want || c.GBPS != 8192/c.Stats.Median {
		t.Errorf("throughput %v GFLOP/s %v GB/s", c.GFLOPS, c.GBPS)
	}
	if c.Roofline == nil || c.Roofline.Attained != nil || !strings.Contains(c.Roofline.Note, "cpu backend") || c.Roofline.ArithmeticIntensity != 0.125 {
		t.Errorf("roofline %+v", c.Roofline)
	}
	kinds := map[string]bool{}
	for _, f := range out.Results {
		kinds[f.Kind+":"+f.Path] = true
		if len(f.SHA256) != 64 {
			t.Errorf("file %+v has no digest", f)
		}
	}
	for _, k := range []string{"results:steps/bench/results-seed1.json", "results:steps/bench/results-seed2.json", "benchmark:steps/bench/benchmark.json", "samples:steps/bench/samples.csv", "junit:steps/bench/junit.xml"} {
		if !kinds[k] {
			t.Errorf("Results lacks %s: %v", k, kinds)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(s.StepDir, "samples.csv"))
	if n := strings.Count(string(csv), "\n"); n != 61 {
		t.Errorf("samples.csv has %d lines, want 61", n)
	}
	j, err := ReadResults(filepath.Join(s.StepDir, "junit.xml"))
	if err != nil || j.Count().Passed != 2 {
		t.Errorf("junit.xml: %v %+v", err, j)
	}
}

func TestBenchmarkFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		run    string
		want   string
		status step.Status
	}{
		{"failed case", `"$HARNESS" out.json 1 failed`, "scale/n=1024 failed", step.Failed},
		{"exit code", `"$HARNESS" out.json; exit 2`, "exit code 2 (seed 1)", step.Failed},
		{"no samples", `echo '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed"}]}' > out.json`, "reports no samples_ns", step.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, benchStep("b", "1", func(st *pipeline.Step) { st.Run = sh(tt.run) }))
			out, err := Benchmark{}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tt.status || !strings.Contains(out.Reason, tt.want) {
				t.Errorf("status %s reason %q, want %s containing %q", out.Status, out.Reason, tt.status, tt.want)
			}
		})
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// saveBaseline runs a benchmark and saves its samples as a baseline.
func saveBaseline(t *testing.T, hw *hardware.Record) string {
	t.Helper()
	s := newContext(t, benchStep("bench", "1", func(st *pipeline.Step) { st.Seeds = []int{11, 12} }))
	s.Hardware = hw
	out, err := Benchmark{}.Execute(t.Context(), s)
	if err != nil || out.Status != step.Passed {
		t.Fatalf("baseline run: %v %+v", err, out)
	}
	runDir := filepath.Dir(filepath.Dir(s.StepDir))
	raw, err := json.Marshal(hw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "hardware.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := SaveBaseline(runDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Source.Step != "bench" || b.Hardware.Digest != hw.Digest || b.Hardware.Backend != "cpu" || len(b.Cases) != 2 || len(b.Cases[0].SamplesNS) != 30 {
		t.Fatalf("baseline %+v", b)
	}
	p := filepath.Join(t.TempDir(), "baseline.json")
	if err := b.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// hwA and hwB are two machines' sealed hardware records.
var hwA, hwB = sealed("cpu a"), sealed("cpu b")

func sealed(cpu string) *hardware.Record {
	r := &hardware.Record{Host: hardware.Host{CPUModel: cpu}, GPUs: []hardware.GPU{}, Reason: "no NVIDIA driver"}
	if err := r.Seal(); err != nil {
		panic(err)
	}
	return r
}

func TestBenchmarkGate(t *testing.T) {
	t.Parallel()
	base := saveBaseline(t, hwA)
	g := &pipeline.Gate{Threshold: pipeline.MustPercent("3%"), Alpha: 0.01}
	tests := []struct {
		name    string
		scale   string
		hw      *hardware.Record
		gate    *pipeline.Gate
		status  step.Status
		verdict map[string]stats.Verdict
		reason  string
	}{
		{"same", "1", hwA, g, step.Passed, map[string]stats.Verdict{"copy/n=1024": stats.Same, "scale/n=1024": stats.Same}, ""},
		{"one case 10% slower", "1.1", hwA, g, step.Failed, map[string]stats.Verdict{"copy/n=1024": stats.Same, "scale/n=1024": stats.Slower}, "scale/n=1024 SLOWER"},
		{"slower without a gate only reports", "1.1", hwA, nil, step.Passed, map[string]stats.Verdict{"scale/n=1024": stats.Slower}, ""},
		{"hardware mismatch refused", "1", hwB, g, step.Failed, nil, "refusing to compare"},
		{"hardware mismatch allowed", "1", hwB, &pipeline.Gate{Threshold: pipeline.MustPercent("3%"), Alpha: 0.01, AllowHardwareMismatch: true}, step.Passed, map[string]stats.Verdict{"copy/n=1024": stats.Same}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, benchStep("b", tt.scale, func(st *pipeline.Step) { st.Baseline, st.Gate = "baseline.json", tt.gate }))
			copyFile(t, base, filepath.Join(s.WorkDir, "baseline.json")) // the baseline sits inside the pipeline's root
			s.Hardware = tt.hw
			out, err := Benchmark{}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tt.status || !strings.Contains(out.Reason, tt.reason) {
				t.Errorf("status %s reason %q, want %s containing %q", out.Status, out.Reason, tt.status, tt.reason)
			}
			d := out.Details.(*BenchmarkDetails)
			if d.Gate == nil {
				t.Fatal("no gate result")
			}
			for name, v := range tt.verdict {
				found := false
				for _, c := range d.Gate.Report.Cases {
					if c.Name == name {
						found = true
						if c.Verdict != v {
							t.Errorf("%s: %s (%s), want %s", name, c.Verdict, c.Reason, v)
						}
					}
				}
				if !found {
					t.Errorf("no verdict for %s", name)
				}
			}
		})
	}
	t.Run("missing baseline", func(t *testing.T) {
		t.Parallel()
		s := newContext(t, benchStep("b", "1", func(st *pipeline.Step) { st.Baseline, st.Gate = "nope.json", g }))
		_, err := Benchmark{}.Execute(t.Context(), s)
		if !errors.Is(err, ErrNoBaseline) {
			t.Errorf("err = %v, want ErrNoBaseline", err)
		}
	})
}

func TestBurnin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		run      string
		duration string
		leak     string
		cancel   time.Duration
		status   step.Status
		reason   string
	}{
		{"steady", `"$HARNESS" out.json`, "400ms", "", 0, step.Passed, "outputs of 2 cases identical"},
		{"output changes", `n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; if [ $n -ge 2 ]; then "$HARNESS" out.json 1 passed; sed -i 's/0000000000000000000000000000000000000000000000000000000000000001/00000000000000000000000000000000000000000000000000000000000000ff/' out.json; else "$HARNESS" out.json; fi`,
			"10s", "", 0, step.Failed, "iteration 3: outputs differ from iteration 1: iteration 3: scale/n=1024/seed=0 output"},
		{"failing iteration", `n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; if [ $n -ge 1 ]; then "$HARNESS" out.json 1 failed; else "$HARNESS" out.json; fi`,
			"10s", "", 0, step.Failed, "iteration 2: case scale/n=1024/seed=0 failed"},
		{"device memory leak", `n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; "$HARNESS" out.json; sed -i "s/\"kernel\":\"copy\"/\"kernel\":\"copy\",\"device_memory_used_bytes\":$(( (n+1) * 4194304 ))/" out.json`,
			// Long enough for the 3 iterations a trend needs on a loaded machine.
			"3s", "1MiB", 0, step.Failed, "device memory rises by 4194304 bytes per iteration"},
		{"cut short", `sleep 5; "$HARNESS" out.json`, "10s", "", 300 * time.Millisecond, step.Failed, "cut short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, pipeline.Step{ID: "burn", Kind: "burnin", Run: sh(tt.run), Results: "out.json", Duration: pipeline.MustDuration(tt.duration), LeakTolerance: sizeOrZero(tt.leak), Repeats: pipeline.Repeats{N: 3}})
			ctx := t.Context()
			if tt.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.cancel)
				defer cancel()
			}
			start := time.Now()
			out, err := Burnin{}.Execute(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			d := out.Details.(*BurninDetails)
			if out.Status != tt.status || !strings.Contains(out.Reason, tt.reason) {
				t.Errorf("status %s reason %q, want %s containing %q (details %+v)", out.Status, out.Reason, tt.status, tt.reason, d)
			}
			if tt.status == step.Passed {
				if !d.Completed || d.Iterations < 1 || time.Since(start) < 400*time.Millisecond {
					t.Errorf("details %+v", d)
				}
				if d.HostRSS == nil || d.HostRSS.Series[0] <= 0 {
					t.Errorf("host RSS not measured: %+v", d.HostRSS)
				}
			} else if d.Completed {
				t.Error("a failed burn-in says completed")
			}
		})
	}
}

func TestSlope(t *testing.T) {
	t.Parallel()
	if s, ok := Slope([]float64{1, 3, 5, 7}); !ok || s != 2 {
		t.Errorf("slope %v %v, want 2", s, ok)
	}
	if s, ok := Slope([]float64{5, 5, 5}); !ok || s != 0 {
		t.Errorf("flat slope %v", s)
	}
	if _, ok := Slope([]float64{1}); ok {
		t.Error("slope of one point")
	}
}

func TestProfile(t *testing.T) {
	t.Parallel()
	t.Run("report kept", func(t *testing.T) {
		t.Parallel()
		s := newContext(t, pipeline.Step{ID: "p", Kind: "profile", Run: sh(`echo report > k.ncu-rep # ncu -o k ./bench`)})
		out, err := Profile{}.Execute(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		d := out.Details.(*ProfileDetails)
		if out.Status != step.Passed || len(out.Results) != 1 || out.Results[0].Path != "k.ncu-rep" || out.Results[0].Kind != "profile" || d.Tool != "ncu" {
			t.Errorf("outcome %+v details %+v", out, d)
		}
	})
	t.Run("stale report", func(t *testing.T) {
		t.Parallel()
		s := newContext(t, pipeline.Step{ID: "p", Kind: "profile", Run: sh(`true`), Outputs: []string{"*.nsys-rep"}})
		old := filepath.Join(s.WorkDir, "old.nsys-rep")
		if err := os.WriteFile(old, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-time.Hour)
		if err := os.Chtimes(old, past, past); err != nil {
			t.Fatal(err)
		}
		out, err := Profile{}.Execute(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != step.Failed || !strings.Contains(out.Reason, "1 stale") {
			t.Errorf("outcome %+v", out)
		}
	})
}

// A benchmark without warmup: leaves GPUATTEST_WARMUP unset, so the
// suite's own default (the harness's 3) applies; warmup: 0 exports 0.
func TestBenchmarkWarmupOnlyWhenSet(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		warmup *int
		want   string
	}{
		{"unset", nil, "unset\nunset\n"},
		{"zero", ptrInt(0), "0\n0\n"},
		{"five", ptrInt(5), "5\n5\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, benchStep("bench", "1", func(st *pipeline.Step) { st.Warmup = tt.warmup }))
			s.Step.Run = sh(`echo "${GPUATTEST_WARMUP-unset}" >> env.log; "$HARNESS" out.json`)
			out, err := Benchmark{}.Execute(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != step.Passed {
				t.Fatalf("status %s: %s", out.Status, out.Reason)
			}
			if env, _ := os.ReadFile(filepath.Join(s.WorkDir, "env.log")); string(env) != tt.want {
				t.Errorf("GPUATTEST_WARMUP seen by the suite: %q, want %q", env, tt.want)
			}
			if d := out.Details.(*BenchmarkDetails); (d.Warmup == nil) != (tt.warmup == nil) || (d.Warmup != nil && *d.Warmup != *tt.warmup) {
				t.Errorf("details warmup %v, want %v", d.Warmup, tt.warmup)
			}
		})
	}
}

// sizeOrZero is a test case's leak tolerance; "" leaves it out.
func sizeOrZero(s string) pipeline.Size {
	if s == "" {
		return pipeline.Size{}
	}
	return pipeline.MustSize(s)
}
