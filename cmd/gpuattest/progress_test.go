package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// progressPipeline is a build step, then a 3-second burn-in whose suite
// takes 0.3 s an iteration.
const progressPipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: prog
steps:
  - id: build
    run: sleep 0.5
  - id: soak
    kind: burnin
    needs: [build]
    run: "sleep 0.3; echo '{\"schema\":\"https://gpuattest.dev/results/v1\",\"tool\":\"t\",\"backend\":\"cpu\",\"cases\":[{\"name\":\"a\",\"status\":\"passed\",\"output_sha256\":\"abababababababababababababababababababababababababababababababab\"}]}' > r.json"
    results: r.json
    duration: 3s
`

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunProgressOnTerminal runs a pipeline with stderr on a
// pseudo-terminal: the live area shows the running burn-in with its
// elapsed and remaining time and iterations, redrawn in place (mpb moves
// the cursor up), and the finished steps scroll above it as plain lines.
func TestRunProgressOnTerminal(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(progressPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	var screen syncBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&screen, ptmx)
	}()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	t.Setenv("NO_COLOR", "1")
	var stdout bytes.Buffer
	code := execute([]string{"run", filepath.Join(dir, "p.yaml"), "--out", filepath.Join(dir, "r")}, strings.NewReader(""), &stdout, tty)
	tty.Close()
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	out := screen.String()
	if code != 0 {
		t.Fatalf("run exited %d\nstdout:\n%s\nterminal:\n%q", code, stdout.String(), out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`build\s+\S \d+s`),                                            // a running step with its elapsed time
		regexp.MustCompile(`soak\s+.*\d+s/3s, [1-9]\d* iterations, 0 errors, \d+s left`), // burn-in status
		regexp.MustCompile(`pass\s+build`),                                               // finished steps scroll above
		regexp.MustCompile(`pass\s+soak`),
		regexp.MustCompile("\x1b\\[\\d+A"), // the live area is redrawn in place (cursor up)
	} {
		if !want.MatchString(out) {
			t.Errorf("terminal output does not match %q:\n%q", want, out)
		}
	}
	if regexp.MustCompile("\x1b\\[3\\dm").MatchString(out) {
		t.Errorf("colours despite NO_COLOR=1:\n%q", out)
	}
	// Progress never reaches the step's logs.
	for _, f := range []string{"stdout.log", "stderr.log"} {
		b, err := os.ReadFile(filepath.Join(dir, "r", "steps", "soak", f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "iterations") || strings.Contains(string(b), "\x1b[") {
			t.Errorf("%s holds progress: %q", f, b)
		}
	}
}

// TestHeartbeatOffTerminal checks the plain-line mode: a heartbeat line
// per long-running step, in the format, at each interval.
func TestHeartbeatOffTerminal(t *testing.T) {
	p := &pipeline.Pipeline{Steps: []pipeline.Step{{ID: "burnin", Kind: pipeline.KindBurnin, Duration: pipeline.MustDuration("1h")}, {ID: "bench", Kind: pipeline.KindBenchmark}}}
	var out syncBuffer
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	off := false
	pr := newProgress(&out, p, progressOptions{tty: &off, heartbeat: 20 * time.Millisecond, now: clock})
	pr.Event(runtypes.Event{Type: "start", Step: "burnin", Kind: pipeline.KindBurnin})
	pr.Event(runtypes.Event{Type: "start", Step: "bench", Kind: pipeline.KindBenchmark})
	mu.Lock()
	now = now.Add(12*time.Minute + 30*time.Second)
	mu.Unlock()
	pr.Event(runtypes.Event{Type: "progress", Step: "burnin", Progress: &runtypes.Progress{Iterations: 4500}})
	pr.Event(runtypes.Event{Type: "progress", Step: "bench", Progress: &runtypes.Progress{Samples: 1200, CIWidth: 0.024}})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "bench 12m30s") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	pr.Event(runtypes.Event{Type: "finish", Step: "bench", State: runtypes.Passed, Duration: time.Minute})
	pr.Close()
	got := out.String()
	for _, want := range []string{
		"start  burnin               burnin\n",
		"burnin 12m30s/1h0m, 4500 iterations, 0 errors, 47m30s left\n",
		"bench 12m30s, 1200 samples, CI ±1.2%\n",
		"pass   bench                  60.00s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") {
		t.Errorf("escape sequences off a terminal:\n%q", got)
	}
}

// TestBurninStatusBeforeCounts: before its first invocation reports (a
// sustained burn-in's one invocation runs the whole duration) a burn-in's
// line claims no count; after, it has them.
func TestBurninStatusBeforeCounts(t *testing.T) {
	p := &pipeline.Pipeline{Steps: []pipeline.Step{{ID: "burnin", Kind: pipeline.KindBurnin, Duration: pipeline.MustDuration("30s")}}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	off := false
	pr := newProgress(io.Discard, p, progressOptions{tty: &off, now: func() time.Time { return start.Add(8 * time.Second) }})
	defer pr.Close()
	l := &live{id: "burnin", kind: pipeline.KindBurnin, start: start}
	if got := pr.status(l); got != "8s/30s, 22s left" {
		t.Errorf("before any count: %q", got)
	}
	l.last.Iterations = 3
	if got := pr.status(l); got != "8s/30s, 3 iterations, 0 errors, 22s left" {
		t.Errorf("after 3 iterations: %q", got)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second:                "45s",
		12*time.Minute + 30*time.Second: "12m30s",
		time.Hour:                       "1h0m",
		time.Hour + 2*time.Second:       "1h0m2s",
		1500 * time.Millisecond:         "2s",
		10 * time.Minute:                "10m",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestRoundsStatus: a benchmark with rounds: auto shows its pairs, the
// widest undecided interval against the threshold, and its budget left.
func TestRoundsStatus(t *testing.T) {
	p := &pipeline.Pipeline{Steps: []pipeline.Step{{ID: "bench", Kind: pipeline.KindBenchmark}}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	off := false
	pr := newProgress(io.Discard, p, progressOptions{tty: &off, now: func() time.Time { return start.Add(90 * time.Second) }})
	defer pr.Close()
	l := &live{id: "bench", kind: pipeline.KindBenchmark, start: start}
	l.last = runtypes.Progress{Samples: 480, Rounds: 16, MaxRounds: 300, Undecided: 1, GateCase: "sgemm/n=128", GateDelta: 0.031, GateLo: -0.08, GateHi: 0.142, GateThreshold: 0.1, TimeLeft: 8*time.Minute + 30*time.Second}
	if got, want := pr.status(l), "1m30s, 480 samples, 16/300 rounds, 1 undecided: sgemm/n=128 +3.1% [-8.0%, +14.2%] vs ±10.0%, 8m30s budget left"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	l.last.GateLo, l.last.GateHi = math.Inf(-1), math.Inf(1)
	if got := pr.status(l); !strings.Contains(got, "[unbounded] vs ±10.0%") {
		t.Errorf("too few pairs: %q", got)
	}
	l.last = runtypes.Progress{Samples: 300, Rounds: 10}
	if got := pr.status(l); got != "1m30s, 300 samples, 10 rounds" {
		t.Errorf("rounds: N: %q", got)
	}
}
