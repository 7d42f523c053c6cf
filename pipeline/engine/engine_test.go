package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// load writes a pipeline into a temp dir and loads it.
func load(t testing.TB, yaml string) *pipeline.Pipeline {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: t\n"+yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func states(r *Record) map[string]runtypes.State {
	m := map[string]runtypes.State{}
	for _, s := range r.Steps {
		m[s.ID] = s.State
	}
	return m
}

func TestSkipPropagationAndIndependentBranches(t *testing.T) {
	p := load(t, `steps:
  - {id: bad, run: "exit 1"}
  - {id: child, run: "true", needs: [bad]}
  - {id: grandchild, run: "true", needs: [child]}
  - {id: other, run: "true"}
  - {id: joined, run: "true", needs: [other, child]}
`)
	res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithoutCache())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]runtypes.State{"bad": runtypes.Failed, "child": runtypes.Skipped, "grandchild": runtypes.Skipped, "other": runtypes.Passed, "joined": runtypes.Skipped}
	got := states(res.Record)
	for id, st := range want {
		if got[id] != st {
			t.Errorf("%s: %s, want %s", id, got[id], st)
		}
	}
	if res.Record.State != runtypes.Failed {
		t.Errorf("run state %s, want failed", res.Record.State)
	}
	if r := res.Record.Step("grandchild").Reason; r != "needs child, which was skipped" {
		t.Errorf("grandchild reason %q", r)
	}
}

// TestJobsBound runs 6 independent steps that record how many run at once.
func TestJobsBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("steps:\n")
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, run: 'mkdir lock$GPUATTEST_STEP_ID.d; ls -d lock*.d | wc -l >> peak; sleep 0.15; rmdir lock$GPUATTEST_STEP_ID.d'}\n", i)
	}
	p := load(t, b.String())
	for _, jobs := range []int{1, 3} {
		os.Remove(filepath.Join(p.Dir, "peak"))
		res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithJobs(jobs), WithoutCache())
		if err != nil || !res.Passed() {
			t.Fatalf("jobs %d: %v %+v", jobs, err, res.Record)
		}
		data, _ := os.ReadFile(filepath.Join(p.Dir, "peak"))
		peak := 0
		for _, f := range strings.Fields(string(data)) {
			var n int
			fmt.Sscan(f, &n)
			peak = max(peak, n)
		}
		if peak > jobs {
			t.Errorf("jobs %d: %d steps ran at once", jobs, peak)
		}
		if jobs == 3 && peak < 2 {
			t.Errorf("jobs 3: steps never overlapped (peak %d)", peak)
		}
	}
}

func TestCancelMarksInterrupted(t *testing.T) {
	p := load(t, `steps:
  - {id: long, run: "sleep 30"}
  - {id: after, run: "true", needs: [long]}
`)
	ctx, cancel := context.WithCancel(t.Context())
	var once sync.Once
	start := time.Now()
	res, err := Run(ctx, p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithoutCache(), WithProgress(func(ev runtypes.Event) {
		if ev.Type == "start" {
			once.Do(func() { time.AfterFunc(200*time.Millisecond, cancel) })
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("cancel did not stop the step promptly")
	}
	if res.Record.State != runtypes.Interrupted {
		t.Errorf("run state %s, want interrupted", res.Record.State)
	}
	if s := res.Record.Step("long"); s.State != runtypes.Error || !strings.HasPrefix(s.Reason, "interrupted") {
		t.Errorf("long: %s %q", s.State, s.Reason)
	}
	if s := res.Record.Step("after"); s.State != runtypes.Skipped && s.State != runtypes.Pending {
		t.Errorf("after: %s", s.State)
	}
	// run.json on disk says the same.
	rec, err := ReadRecord(res.Dir)
	if err != nil || rec.State != runtypes.Interrupted {
		t.Fatalf("on disk: %v %v", rec, err)
	}
}

func TestCacheHitRestoresOutputs(t *testing.T) {
	p := load(t, `steps:
  - id: gen
    run: mkdir -p out && date +%s%N > out/stamp && cp in.txt out/copy
    inputs: [in.txt]
    outputs: [out/**]
`)
	in := filepath.Join(p.Dir, "in.txt")
	os.WriteFile(in, []byte("one"), 0o644)
	cacheDir := t.TempDir()
	run := func() *Record {
		res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithCacheDir(cacheDir))
		if err != nil || !res.Passed() {
			t.Fatalf("%v %+v", err, res)
		}
		return res.Record
	}
	first := run().Step("gen")
	if first.Cache != "miss" || len(first.Outputs) != 2 {
		t.Fatalf("first run: cache %s outputs %v", first.Cache, first.Outputs)
	}
	stamp, _ := os.ReadFile(filepath.Join(p.Dir, "out/stamp"))
	os.RemoveAll(filepath.Join(p.Dir, "out"))
	second := run().Step("gen")
	if second.Cache != "hit" {
		t.Fatalf("second run: cache %s", second.Cache)
	}
	restored, err := os.ReadFile(filepath.Join(p.Dir, "out/stamp"))
	if err != nil || string(restored) != string(stamp) {
		t.Fatalf("restored stamp %q, want %q (%v)", restored, stamp, err)
	}
	if st, err := os.Stat(filepath.Join(p.Dir, "out/stamp")); err != nil || st.Mode().Perm()&0o200 == 0 {
		t.Errorf("restored file is not writable: %v", st.Mode())
	}
	// A changed input misses.
	os.WriteFile(in, []byte("two"), 0o644)
	if third := run().Step("gen"); third.Cache != "miss" {
		t.Fatalf("changed input: cache %s", third.Cache)
	}
}

func TestOutputsMustMatch(t *testing.T) {
	p := load(t, `steps:
  - {id: a, run: "true", outputs: [missing/*.bin]}
`)
	res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithoutCache())
	if err != nil {
		t.Fatal(err)
	}
	s := res.Record.Step("a")
	if s.State != runtypes.Failed || !strings.Contains(s.Reason, `outputs[0] "missing/*.bin" matched no files`) {
		t.Errorf("%s %q", s.State, s.Reason)
	}
}

func TestMatchDoubleStar(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"**/*.fatbin", "a/b/k.fatbin", true},
		{"**/*.fatbin", "k.fatbin", true},
		{"build/**", "build/x/y", true},
		{"build/**/k.cu", "src/k.cu", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/d/c", false},
	}
	for _, tt := range tests {
		if got := matchDoubleStar(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchDoubleStar(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestRecordIsValidJSONWhileRunning(t *testing.T) {
	p := load(t, `steps:
  - {id: a, run: "sleep 0.3"}
  - {id: b, run: "sleep 0.3", needs: [a]}
`)
	dir := filepath.Join(t.TempDir(), "r")
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(context.Background(), p, WithOutDir(dir), WithoutCache())
	}()
	reads := 0
	for {
		select {
		case <-done:
			if reads < 10 {
				t.Fatalf("only %d reads", reads)
			}
			return
		default:
		}
		if data, err := os.ReadFile(filepath.Join(dir, "run.json")); err == nil {
			reads++
			if !json.Valid(data) {
				t.Fatalf("run.json invalid mid-run:\n%s", data)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkStepOverhead measures the engine's per-step cost for a chain of
// trivial host steps (in-process: CLI start-up excluded).
func BenchmarkStepOverhead(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("steps:\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&sb, "  - {id: s%02d, run: \"true\"", i)
		if i > 0 {
			fmt.Fprintf(&sb, ", needs: [s%02d]", i-1)
		}
		sb.WriteString("}\n")
	}
	p := load(b, sb.String())
	base := b.TempDir()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := Run(context.Background(), p, WithOutDir(filepath.Join(base, fmt.Sprint(i))), WithoutCache(), WithJobs(1)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/20/1000, "ms/step")
}

// BenchmarkCachedRerun measures a fully cached re-run of a 20-step build
// pipeline (in-process).
func BenchmarkCachedRerun(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("steps:\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&sb, "  - {id: b%02d, run: \"mkdir -p out && cp src%02d out/o%02d\", inputs: [src%02d], outputs: [out/o%02d]", i, i, i, i, i)
		if i > 0 {
			fmt.Fprintf(&sb, ", needs: [b%02d]", i-1)
		}
		sb.WriteString("}\n")
	}
	p := load(b, sb.String())
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(p.Dir, fmt.Sprintf("src%02d", i)), []byte(strings.Repeat("x", 64<<10)), 0o644)
	}
	cacheDir := b.TempDir()
	base := b.TempDir()
	if _, err := Run(context.Background(), p, WithOutDir(filepath.Join(base, "cold")), WithCacheDir(cacheDir)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := Run(context.Background(), p, WithOutDir(filepath.Join(base, fmt.Sprint(i))), WithCacheDir(cacheDir))
		if err != nil || res.Record.Steps[19].Cache != "hit" {
			b.Fatalf("%v", err)
		}
	}
}

// TestNoCacheDirMeansNoCache: with neither XDG_CACHE_HOME nor HOME the
// build cache is off, never put in a shared temporary directory.
func TestNoCacheDirMeansNoCache(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	p := load(t, "steps:\n  - {id: a, run: 'echo x > out.txt', outputs: [out.txt]}\n")
	for i := range 2 {
		res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")))
		if err != nil || !res.Passed() {
			t.Fatalf("run %d: %v %+v", i, err, res.Record)
		}
		if c := res.Record.Step("a").Cache; c == "hit" {
			t.Fatalf("run %d: cache %q without a cache directory", i, c)
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("the temporary directory holds %v", ents)
	}
}

// Copies of outputs keep the output's own permission bits minus write, in
// the run directory, in the cache and on a cache hit: a 0600 key never
// becomes readable by others, also when a 0644 file with the same bytes
// was cached first.
func TestOutputModesNeverWiden(t *testing.T) {
	p := load(t, `steps:
  - id: make
    run: "mkdir -p out && printf s3cret > out/a.pub && chmod 644 out/a.pub && printf s3cret > out/b.key && chmod 600 out/b.key && printf '#!/bin/sh\n' > out/tool && chmod 755 out/tool"
    outputs: ["out/**"]
`)
	cache := t.TempDir()
	perm := func(path string) os.FileMode {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	want := map[string]os.FileMode{"out/a.pub": 0o444, "out/b.key": 0o400, "out/tool": 0o555}
	for _, attempt := range []string{"miss", "hit"} {
		res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithCacheDir(cache))
		if err != nil {
			t.Fatal(err)
		}
		sr := res.Record.Step("make")
		if sr.State != runtypes.Passed || sr.Cache != attempt {
			t.Fatalf("%s: state %s cache %s (%s)", attempt, sr.State, sr.Cache, sr.Reason)
		}
		for name, w := range want {
			if got := perm(filepath.Join(res.Dir, "steps", "make", "outputs", name)); got != w {
				t.Errorf("%s: run dir %s mode %v, want %v", attempt, name, got, w)
			}
		}
		if got := perm(filepath.Join(p.Root, "out", "b.key")); got != 0o600 {
			t.Errorf("%s: work tree b.key mode %v, want 0600", attempt, got)
		}
	}
	objs, _ := filepath.Glob(filepath.Join(cache, "*", "objects", "*", "*"))
	more, _ := filepath.Glob(filepath.Join(cache, "objects", "*", "*"))
	objs = append(objs, more...)
	if len(objs) < 2 {
		t.Fatalf("found %d cache objects under %s, want the two contents", len(objs), cache)
	}
	for _, o := range objs {
		if m := perm(o); m&0o222 != 0 {
			t.Errorf("cache object %s is writable: %v", o, m)
		}
	}
}

// TestCacheEntryFailingTheCheckIsAMiss: a cache entry whose record the
// run cannot read (details of another gpuattest build sharing the cache)
// is a miss with a note, never a failed step, and the step's fresh
// entry replaces it.
func TestCacheEntryFailingTheCheckIsAMiss(t *testing.T) {
	p := load(t, `steps:
  - id: gen
    run: mkdir -p out && date +%s%N > out/stamp
    outputs: [out/**]
`)
	cacheDir := t.TempDir()
	strict := WithCacheCheck(func(sr *StepRecord) error {
		if sr.ID != "gen" || sr.Kind != pipeline.KindExec {
			return fmt.Errorf("step %q kind %q: the record to check names no step", sr.ID, sr.Kind) // a decoder needs both
		}
		if bytes.Contains(sr.Details, []byte(`"from_another_build"`)) {
			return errors.New(`exec details: json: unknown field "from_another_build"`)
		}
		return nil
	})
	run := func() *StepRecord {
		res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithCacheDir(cacheDir), strict)
		if err != nil || !res.Passed() {
			t.Fatalf("%v %+v", err, res)
		}
		return res.Record.Step("gen")
	}
	if first := run(); first.Cache != "miss" {
		t.Fatalf("first run: cache %s", first.Cache)
	}
	manifests, err := filepath.Glob(filepath.Join(cacheDir, "*", "*.json"))
	if err != nil || len(manifests) == 0 {
		manifests, _ = filepath.Glob(filepath.Join(cacheDir, "*", "*", "*.json"))
	}
	if len(manifests) != 1 {
		t.Fatalf("cache manifests: %v", manifests)
	}
	var m map[string]any
	data, _ := os.ReadFile(manifests[0])
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["details"] = map[string]any{"from_another_build": true}
	data, _ = json.Marshal(m)
	if err := os.WriteFile(manifests[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	second := run()
	if second.Cache != "miss" || !slices.ContainsFunc(second.Notes, func(n string) bool { return strings.Contains(n, "cache entry unreadable") }) {
		t.Fatalf("entry of another build: cache %s, notes %q", second.Cache, second.Notes)
	}
	if third := run(); third.Cache != "hit" {
		t.Fatalf("after the fresh entry: cache %s, notes %q", third.Cache, third.Notes)
	}
}
