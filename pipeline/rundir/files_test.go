package rundir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/reportfixture"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
)

func TestStepFiles(t *testing.T) {
	dir := t.TempDir()
	if err := reportfixture.Write(dir, reportfixture.Options{Samples: 20}); err != nil {
		t.Fatal(err)
	}
	run, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := run.BenchmarkSamples("bench")
	if err != nil || bd == nil || len(bd.Cases[0].SamplesNS) != 20 || len(bd.Reference.Cases[0].SamplesNS) != 20 {
		t.Fatalf("BenchmarkSamples: %v, %+v", err, bd)
	}
	if bd, err := run.BenchmarkSamples("harness"); bd != nil || err != nil {
		t.Errorf("a step without benchmark.json: %v, %v", bd, err)
	}
	lines, err := run.Telemetry("burnin")
	if err != nil || len(lines) != 120+2 {
		t.Fatalf("Telemetry: %d lines, %v", len(lines), err)
	}
	// A last line cut short by a kill is dropped; a bad line before the
	// end is an error.
	path := filepath.Join(dir, "steps", "burnin", "telemetry.jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-`)
	f.Close()
	if got, err := run.Telemetry("burnin"); err != nil || len(got) != len(lines) {
		t.Errorf("cut last line: %d lines, %v", len(got), err)
	}
	os.WriteFile(path, []byte("{\"kind\":\n{}\n"), 0o644)
	if _, err := run.Telemetry("burnin"); err == nil || !strings.Contains(err.Error(), "telemetry.jsonl:1") {
		t.Errorf("bad line: %v, want an error naming telemetry.jsonl:1", err)
	}
	for _, id := range []string{"../x", "a/b", "..", ""} {
		if _, err := run.Telemetry(id); err == nil {
			t.Errorf("Telemetry(%q): no error", id)
		}
	}
	if b, err := run.Attestations(); b != nil || err != nil {
		t.Errorf("unsigned run: %q, %v", b, err)
	}
}
