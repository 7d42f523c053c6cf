package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

//go:embed report.html.tmpl
var pageTemplate string

// CSP is the Content-Security-Policy the HTML report declares: nothing
// may be fetched, no script runs; only inline styles apply.
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

// pageTmpl parses the page template on first use, not at init: every
// gpuattest process links this package, few render HTML.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"dur":      fmtDur,
		"ns":       fmtNS,
		"pct":      fmtPct,
		"pct100":   func(v float64) float64 { return 100 * v },
		"bytes":    func(v uint64) string { return fmtBytes(float64(v)) },
		"bytesp":   func(v *uint64) string { return derefBytes(v) },
		"boolp":    fmtBoolP,
		"intp":     fmtIntP,
		"floatp":   fmtFloatP,
		"u32p":     fmtU32P,
		"ts":       func(t time.Time) string { return fmtTime(t) },
		"short":    shortDigest,
		"verdict":  verdictClass,
		"state":    stateClass,
		"join":     strings.Join,
		"csp":      func() string { return CSP },
		"clocks":   fmtClocks,
		"pcie":     fmtPCIe,
		"interval": fmtInterval,
	}).Parse(pageTemplate))
})

// figure is one chart in the page.
type figure struct {
	ID, Title string
	SVG       template.HTML
}

// benchView is one benchmark step with its per-case figures.
type benchView struct {
	Benchmark
	Figures map[string]figure
}

type burninView struct {
	Burnin
	Figures []figure
}

type telemetryView struct {
	Telemetry
	Figures []figure
	Events  int
}

// page is what the template renders.
type page struct {
	*Report
	Title      string
	Timeline   *figure
	Benchmarks []benchView
	Burnins    []burninView
	Telemetry  []telemetryView
	Generated  time.Time
}

// WriteHTML writes the report as one self-contained HTML page: inline CSS
// and SVG charts, no script, nothing fetched (a Content-Security-Policy
// of default-src 'none' says so to the browser). Every string from the
// run, its results or a predicate is escaped.
func (r *Report) WriteHTML(w io.Writer) error {
	pg, err := r.page()
	if err != nil {
		return err
	}
	return pageTmpl().Execute(w, pg)
}

func (r *Report) page() (*page, error) {
	pg := &page{Report: r, Generated: time.Now().UTC()}
	pg.Title = "gpuattest report"
	if r.Pipeline != "" {
		pg.Title += ": " + r.Pipeline
	}
	svg := func(c *chart) (figure, error) {
		s, err := c.svg()
		// The chart's text is escaped by vgsvg (html.EscapeString); the
		// injection test checks that nothing unescaped gets through.
		return figure{ID: "chart-" + c.File, Title: c.Title, SVG: template.HTML(s)}, err
	}
	if c := timelineChart(r.Steps); c != nil {
		f, err := svg(c)
		if err != nil {
			return nil, err
		}
		pg.Timeline = &f
	}
	for _, b := range r.Benchmarks {
		bv := benchView{Benchmark: b, Figures: map[string]figure{}}
		for _, c := range b.Cases {
			if ch := caseChart(b.Step, c); ch != nil {
				f, err := svg(ch)
				if err != nil {
					return nil, err
				}
				bv.Figures[c.Name] = f
			}
		}
		pg.Benchmarks = append(pg.Benchmarks, bv)
	}
	for _, b := range r.Burnins {
		bv := burninView{Burnin: b}
		for _, ch := range burninCharts(b) {
			f, err := svg(ch)
			if err != nil {
				return nil, err
			}
			bv.Figures = append(bv.Figures, f)
		}
		pg.Burnins = append(pg.Burnins, bv)
	}
	for _, t := range r.Telemetry {
		tv := telemetryView{Telemetry: t}
		for _, l := range t.Lines {
			if l.Kind != "sample" {
				tv.Events++
			}
		}
		for _, ch := range telemetryCharts(t) {
			f, err := svg(ch)
			if err != nil {
				return nil, err
			}
			tv.Figures = append(tv.Figures, f)
		}
		pg.Telemetry = append(pg.Telemetry, tv)
	}
	return pg, nil
}

// charts returns every chart of the report, for WritePNGs.
func (r *Report) charts() []*chart {
	var out []*chart
	if c := timelineChart(r.Steps); c != nil {
		out = append(out, c)
	}
	for _, b := range r.Benchmarks {
		for _, c := range b.Cases {
			if ch := caseChart(b.Step, c); ch != nil {
				out = append(out, ch)
			}
		}
	}
	for _, b := range r.Burnins {
		out = append(out, burninCharts(b)...)
	}
	for _, t := range r.Telemetry {
		out = append(out, telemetryCharts(t)...)
	}
	return out
}

// WritePNGs writes every chart of the report as a PNG into dir (created
// when missing), for places that do not render SVG, and returns the
// files written.
func (r *Report) WritePNGs(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	var files []string
	seen := map[string]int{}
	for _, c := range r.charts() {
		name := c.File
		if n := seen[name]; n > 0 {
			name = fmt.Sprintf("%s-%d", name, n+1)
		}
		seen[c.File]++
		b, err := c.png()
		if err != nil {
			return files, err
		}
		path := filepath.Join(dir, name+".png")
		if err := atomicfile.Write(path, b, 0o644); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

func fmtNS(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "–"
	}
	div, unit := timeUnit(v)
	return fmt.Sprintf("%.3g %s", v/div, unit)
}

func fmtPct(v float64) string {
	return fmt.Sprintf("%+.1f %%", 100*v)
}

func fmtInterval(i stats.Interval) string {
	return fmt.Sprintf("[%+.1f %%, %+.1f %%]", 100*i.Lo, 100*i.Hi)
}

func derefBytes(v *uint64) string {
	if v == nil {
		return "–"
	}
	return fmtBytes(float64(*v))
}

func fmtBoolP(v *bool) string {
	switch {
	case v == nil:
		return "–"
	case *v:
		return "yes"
	}
	return "no"
}

func fmtIntP(v *int) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprint(*v)
}

func fmtU32P(v *uint32) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprint(*v)
}

func fmtFloatP(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.4g", *v)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func fmtClocks(c *hardware.Clocks) string {
	if c == nil {
		return "–"
	}
	return fmt.Sprintf("SM %s MHz, memory %s MHz", fmtU32P(c.SM), fmtU32P(c.Mem))
}

func fmtPCIe(p *hardware.PCIe) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("gen %s x%s", fmtIntP(p.Gen), fmtIntP(p.Width))
}

func shortDigest(d string) string {
	h := strings.TrimPrefix(d, "sha256:")
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

// verdictClass is the CSS class of a benchmark verdict.
func verdictClass(v stats.Verdict) string {
	switch v {
	case stats.Slower, "MISSING":
		return "bad"
	case stats.Faster:
		return "good"
	case stats.Same:
		return "ok"
	}
	return "warn"
}

// stateClass is the CSS class of a step or run state.
func stateClass(s string) string {
	switch s {
	case "passed", "verified", "cached", "PASSED":
		return "good"
	case "failed", "error", "interrupted", "FAILED":
		return "bad"
	case "running", "pending":
		return "warn"
	}
	return "muted"
}
