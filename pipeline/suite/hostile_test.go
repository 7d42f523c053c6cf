package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
)

// TestResultsOutsideRootUntouched: a results path outside the root is
// neither deleted before the run nor read after it.
func TestResultsOutsideRootUntouched(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		results func(victim string) string
	}{
		{"absolute", func(victim string) string { return victim }},
		{"dotdot", func(string) string { return "../outside/victim.json" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newContext(t, pipeline.Step{ID: "t", Kind: "test", Run: sh("true")})
			outside := filepath.Join(filepath.Dir(s.WorkDir), "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(outside, "victim.json")
			if err := os.WriteFile(victim, []byte(goodJSON), 0o644); err != nil {
				t.Fatal(err)
			}
			s.Step.Results = tt.results(victim)
			out, err := Test{}.Execute(t.Context(), s)
			if err == nil {
				t.Errorf("results %s outside the root accepted: %+v", s.Step.Results, out)
			} else if !strings.Contains(err.Error(), "outside") {
				t.Errorf("err = %v, want one saying the results file is outside", err)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != goodJSON {
				t.Errorf("the host file changed: %q %v", b, err)
			}
		})
	}
}

// TestResultsSymlinkOutsideRoot: a results file that is a symlink to a
// host file is refused, and the host file is not copied into the run
// directory.
func TestResultsSymlinkOutsideRoot(t *testing.T) {
	t.Parallel()
	s := newContext(t, pipeline.Step{ID: "t", Kind: "test", Results: "r.json"})
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(goodJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Step.Run = sh("ln -sf '" + secret + "' r.json")
	if _, err := (Test{}).Execute(t.Context(), s); err == nil {
		t.Error("a results symlink to a host file was read")
	}
	if _, err := os.Stat(filepath.Join(s.StepDir, "results.json")); err == nil {
		t.Error("the host file was copied into the step directory")
	}
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("the host file is gone: %v", err)
	}
}

// TestBaselineOutsideRoot: a baseline outside the pipeline's root is not
// read.
func TestBaselineOutsideRoot(t *testing.T) {
	t.Parallel()
	base := saveBaseline(t, hwA)
	g := &pipeline.Gate{Threshold: pipeline.MustPercent("3%"), Alpha: 0.01}
	s := newContext(t, benchStep("b", "1", func(st *pipeline.Step) { st.Baseline, st.Gate = base, g }))
	_, err := Benchmark{}.Execute(t.Context(), s)
	if err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("err = %v, want a refusal of the baseline outside the root", err)
	}
}

// TestMalformedResultsRefused: duplicate JSON keys (the last one would
// win) and a second JUnit root (which would hide the failures of the
// first) are malformed results, not a pass.
func TestMalformedResultsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, body, want string
	}{
		{"duplicate case status", "r.json",
			`{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"failed",` + "\n" + `"message":"wrong","status":"passed"}]}`,
			`r.json:2:19: cases[0]: key "status" appears twice in the object`},
		{"duplicate top-level key", "r.json",
			`{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"failed"}],"cases":[{"name":"a","status":"passed"}]}`,
			`r.json:1:114: key "cases" appears twice in the object`},
		{"two junit roots", "j.xml",
			`<testsuite><testcase name="x"/></testsuite>` + "\n" + `<testsuite><testcase name="y"><failure message="boom"/></testcase></testsuite>`,
			"second root element"},
		{"junit root after failures", "j.xml",
			`<testsuites><testsuite><testcase name="y"><failure message="boom"/></testcase></testsuite></testsuites><testsuites/>`,
			"second root element"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(p, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := ReadResults(p)
			if err == nil {
				t.Fatalf("accepted: %+v", r)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestResultsFIFORefused: a results "file" that is a FIFO is refused, not
// waited on forever.
func TestResultsFIFORefused(t *testing.T) {
	t.Parallel()
	s := newContext(t, pipeline.Step{ID: "t", Kind: "test", Run: sh("mkfifo r.json"), Results: "r.json"})
	done := make(chan error, 1)
	go func() {
		_, err := Test{}.Execute(t.Context(), s)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("err = %v, want a refusal of the FIFO", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO as results hung")
	}
}

// TestSampleSetDuplicateKeys: baselines and benchmark files are refused
// with a duplicate key too.
func TestSampleSetDuplicateKeys(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "base.json")
	os.WriteFile(p, []byte(`{"schema":"`+BaselineSchemaID+`","cases":[{"name":"a","samples_ns":[1,2,3],"samples_ns":[9,9,9]}]}`), 0o644)
	if _, err := LoadSampleSet(p, "baseline"); err == nil || !strings.Contains(err.Error(), `cases[0]: key "samples_ns" appears twice in the object`) {
		t.Errorf("err = %v, want a duplicate key refusal", err)
	}
}
