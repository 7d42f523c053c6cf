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

// TestFleetSection: a fleet run's report has one row per node (job,
// class, node, job ID, GPU, verdict, reason) in the HTML and the
// Markdown, with every string from the bundles shown as text and nothing
// linked outside the page.
func TestFleetSection(t *testing.T) {
	const hostile = `<img src=x onerror=alert(1)>|*[x](https://evil.example)`
	rep := fixtureReport(t, reportfixture.Options{})
	rep.Fleet = &report.Fleet{Dispatch: "20261126-1", DispatchDigest: "sha256:" + strings.Repeat("ab", 32), Cluster: "slurm cluster gpuattest 22.05.8", Collected: true,
		Nodes: []report.FleetNode{
			{Job: "a100-0", Class: "a100", Node: "node1", JobID: "17", GPU: "1x NVIDIA A100-SXM4-40GB (8.0), simulated", Verdict: "passed"},
			{Job: "h100-0", Class: "h100", Node: hostile, JobID: "18", Verdict: "failed", Reason: "on node x: step check failed: " + hostile},
			{Job: "h100-1", Class: "h100", Verdict: "missing", Reason: "no node bundle signed by the job's key; slurm says FAILED"},
		},
		Problems: []string{"job h100-0 (class h100): failed: " + hostile}}
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkInert(t, b.Bytes())
	for _, want := range []string{
		`data-section="fleet"`,
		`<tr data-job="a100-0"><td><code>a100-0</code></td><td>a100</td><td>node1</td><td>17</td><td>1x NVIDIA A100-SXM4-40GB (8.0), simulated</td><td class="good">passed</td><td></td></tr>`,
		`<tr data-job="h100-1"><td><code>h100-1</code></td><td>h100</td><td>–</td><td>–</td><td>–</td><td class="muted">missing</td><td>no node bundle signed by the job&#39;s key; slurm says FAILED</td></tr>`,
		"&lt;img src=x onerror=alert(1)&gt;",
		`<span class="pill bad">failed</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, bad := range []string{"<img", " href=", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("HTML holds %q", bad)
		}
	}
	b.Reset()
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"### Fleet\n\ndispatch `20261126-1` on slurm cluster gpuattest 22.05.8: **failed**\n\n| job | class | node | job ID | GPU | verdict | reason |\n",
		"| a100-0 | a100 | node1 | 17 | 1x NVIDIA A100-SXM4-40GB (8.0), simulated | passed |  |\n",
		"| h100-1 | h100 | – | – | – | **missing** | no node bundle signed by the job's key; slurm says FAILED |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "<img") || strings.Contains(md, "](https://") || strings.Contains(md, "|*[x]") {
		t.Errorf("Markdown carries the node name as markup:\n%s", md)
	}
}
