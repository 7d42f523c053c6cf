package report_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/internal/reportfixture"
	"github.com/gpuattest/gpuattest/pipeline/report"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixtureReport writes a simulated run and gathers its report.
func fixtureReport(t testing.TB, o reportfixture.Options) *report.Report {
	t.Helper()
	dir := t.TempDir()
	if err := reportfixture.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return openReport(t, dir)
}

// openReport gathers the report of the run in dir.
func openReport(t testing.TB, dir string) *report.Report {
	t.Helper()
	run, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.FromRun(run)
	if err != nil {
		t.Fatal(err)
	}
	rep.Source = "RUNDIR" // stable across machines
	return rep
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (hint: go test ./pipeline/report -run %s -update)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", path, diff)
	}
}

func TestMarkdownGolden(t *testing.T) {
	tests := []struct {
		name string
		opts reportfixture.Options
	}{
		{name: "summary.md"},
		{name: "summary-hostile.md", opts: reportfixture.Options{Text: "<img src=x onerror=alert(1)>|*_`[x](javascript:alert(1))\n# h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := fixtureReport(t, tt.opts)
			var b bytes.Buffer
			if err := rep.WriteMarkdown(&b, report.WithHTMLPath("RUNDIR/report.html")); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, b.Bytes())
		})
	}
}

func TestFromRun(t *testing.T) {
	rep := fixtureReport(t, reportfixture.Options{Samples: 40, Telemetry: time.Minute, GPUs: 2})
	if rep.Verdict.Passed || rep.Verdict.State != "failed" {
		t.Errorf("verdict %+v: want failed", rep.Verdict)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0] != report.SimulatedWarning {
		t.Errorf("warnings %q: want the simulated warning", rep.Warnings)
	}
	if len(rep.Benchmarks) != 1 || len(rep.Benchmarks[0].Cases) != 3 || len(rep.Benchmarks[0].Cases[0].Samples) != 40 || len(rep.Benchmarks[0].Cases[0].Against) != 40 {
		t.Fatalf("benchmarks: %+v", rep.Benchmarks)
	}
	if len(rep.Telemetry) != 1 || len(rep.Telemetry[0].Lines) != 2*60+2 {
		t.Errorf("telemetry: %d steps", len(rep.Telemetry))
	}
	if len(rep.Builds) != 1 || !rep.Builds[0].Cached || rep.Builds[0].Reproducible == nil || !*rep.Builds[0].Reproducible {
		t.Errorf("builds: %+v", rep.Builds)
	}
}

func TestWritePNGs(t *testing.T) {
	rep := fixtureReport(t, reportfixture.Options{Samples: 30, Telemetry: 10 * time.Minute, GPUs: 2})
	dir := t.TempDir()
	if d := os.Getenv("GPUATTEST_REPORT_PNGS"); d != "" {
		dir = d // to look at them
	}
	files, err := rep.WritePNGs(dir)
	if err != nil {
		t.Fatal(err)
	}
	// timeline, 3 benchmark cases, 3 burn-in series, 3 telemetry series.
	if len(files) != 10 {
		t.Errorf("%d PNGs, want 10: %v", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG", f)
		}
	}
}

func TestHTMLSelfContained(t *testing.T) {
	rep := fixtureReport(t, reportfixture.Options{})
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`http-equiv="Content-Security-Policy"`, "default-src &#39;none&#39;", report.SimulatedWarning,
		`data-section="verdict"`, `data-section="hardware"`, `data-section="timeline"`, `data-section="build"`, `data-section="benchmarks"`,
		`data-section="burnin"`, `data-section="telemetry"`, `data-section="attestation"`} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "<link", "<iframe", "@import", "url(", " src=", " href="} {
		if strings.Contains(html, bad) {
			t.Errorf("HTML holds %q", bad)
		}
	}
	if os.Getenv("GPUATTEST_REPORT_OUT") != "" {
		if err := os.WriteFile(os.Getenv("GPUATTEST_REPORT_OUT"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
