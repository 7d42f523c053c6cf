package history

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"sync"
)

// Chart geometry, in CSS pixels.
const (
	chartW, chartH         = 760.0, 260.0
	padL, padR, padT, padB = 70.0, 20.0, 20.0, 50.0
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	maxPointsDrawn         = 2000
)

// WriteHTML writes the history as one self-contained page: inline SVG
// charts (one per series: the median as a line, its confidence interval
// as a band, marked steps as red markers naming both digests), the
// releases and those left out; no script, no style sheet or image
// fetched, and a Content-Security-Policy of default-src 'none'.
func (h *History) WriteHTML(w io.Writer) error {
	type chart struct {
		Series Series
		SVG    template.HTML
		Marks  []markView
	}
	var charts []chart
	for _, s := range h.Series {
		svg, ms := seriesSVG(s)
		charts = append(charts, chart{Series: s, SVG: template.HTML(svg), Marks: ms})
	}
	return page().Execute(w, map[string]any{"H": h, "Charts": charts, "ThresholdPct": h.Threshold * 100})
}

type markView struct {
	Text string
}

// seriesSVG draws s.
func seriesSVG(s Series) (string, []markView) {
	pts := s.Points
	if len(pts) > maxPointsDrawn {
		pts = pts[len(pts)-maxPointsDrawn:]
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		lo = math.Min(lo, math.Min(p.MedianNS, nonZero(p.CILowNS, p.MedianNS)))
		hi = math.Max(hi, math.Max(p.MedianNS, nonZero(p.CIHighNS, p.MedianNS)))
	}
	if !(hi > lo) {
		lo, hi = lo*0.9, hi*1.1+1
	}
	span := hi - lo
	lo, hi = math.Max(0, lo-0.1*span), hi+0.1*span
	div, unit := timeUnit(hi)
	x := func(i int) float64 {
		if len(pts) == 1 {
			return padL + plotW/2
		}
		return padL + plotW*float64(i)/float64(len(pts)-1)
	}
	y := func(v float64) float64 { return padT + plotH*(1-(v-lo)/(hi-lo)) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`,
		template.HTMLEscapeString(s.Key.String()), chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fff" stroke="#ccc"/>`, padL, padT, plotW, plotH)
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>`,
			padL, padL+plotW, y(v), y(v), padL-6, y(v)+4, fmt.Sprintf("%.3g %s", v/div, unit))
	}
	// The confidence interval as a band.
	var band []string
	for i, p := range pts {
		band = append(band, fmt.Sprintf("%.1f,%.1f", x(i), y(nonZero(p.CIHighNS, p.MedianNS))))
	}
	for i := len(pts) - 1; i >= 0; i-- {
		band = append(band, fmt.Sprintf("%.1f,%.1f", x(i), y(nonZero(pts[i].CILowNS, pts[i].MedianNS))))
	}
	fmt.Fprintf(&b, `<polygon data-role="ci-band" points="%s" fill="#1f77b4" fill-opacity="0.2" stroke="none"/>`, strings.Join(band, " "))
	var line []string
	for i, p := range pts {
		line = append(line, fmt.Sprintf("%.1f,%.1f", x(i), y(p.MedianNS)))
	}
	fmt.Fprintf(&b, `<polyline data-role="median" points="%s" fill="none" stroke="#1f77b4" stroke-width="2"/>`, strings.Join(line, " "))
	for i, p := range pts {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#1f77b4"><title>%s: median %.4g %s [%.4g, %.4g]&#10;manifest %s&#10;bundle %s</title></circle>`,
			x(i), y(p.MedianNS), template.HTMLEscapeString(p.Tag), p.MedianNS/div, unit, p.CILowNS/div, p.CIHighNS/div, p.Manifest, p.Bundle)
		if len(pts) <= 24 || i%((len(pts)+23)/24) == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end" transform="rotate(-35 %.1f %.1f)">%s</text>`,
				x(i), padT+plotH+14, x(i), padT+plotH+14, template.HTMLEscapeString(shorten(p.Tag, 14)))
		}
	}
	var views []markView
	off := len(s.Points) - len(pts)
	for _, m := range s.Marks {
		from, to := m.From-off, m.To-off
		if from < 0 {
			continue
		}
		text := fmt.Sprintf("%s → %s: %+.1f %% (%s); %s → %s", s.Points[m.From].Tag, s.Points[m.To].Tag, m.Delta*100, m.Direction(), m.FromManifest, m.ToManifest)
		xm := (x(from) + x(to)) / 2
		fmt.Fprintf(&b, `<g data-role="step-marker"><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-width="2" stroke-dasharray="4 3"/><path d="M%.1f %.1f l-6 -10 h12 z" fill="#d62728"/><title>%s</title></g>`,
			xm, xm, padT, padT+plotH, xm, padT+10, template.HTMLEscapeString(text))
		views = append(views, markView{Text: text})
	}
	b.WriteString(`</svg>`)
	return b.String(), views
}

func nonZero(v, or float64) float64 {
	if v == 0 {
		return or
	}
	return v
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// timeUnit picks a unit for nanosecond values up to maxNS.
func timeUnit(maxNS float64) (float64, string) {
	switch {
	case maxNS >= 1e9:
		return 1e9, "s"
	case maxNS >= 1e6:
		return 1e6, "ms"
	case maxNS >= 1e3:
		return 1e3, "µs"
	}
	return 1, "ns"
}

// page is the HTML page's template, parsed on first use: every gpuattest
// command links this package, and parsing it when the process starts
// would cost each of them (gpuattest version included) about 0.1 ms.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("history").Funcs(template.FuncMap{
		"pct": func(f float64) string { return fmt.Sprintf("%.1f %%", f) },
	}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="referrer" content="no-referrer">
<title>Verified benchmark history of {{.H.Repository}}</title>
<style>
body{font-family:system-ui,Arial,Helvetica,sans-serif;margin:2em auto;max-width:960px;color:#222}
table{border-collapse:collapse;font-size:13px;display:block;overflow-x:auto}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
code{font-size:12px}.excluded{color:#a00}.mark{color:#d62728}figure{margin:1.5em 0}figcaption{font-weight:600;margin-bottom:.4em}
.sim{background:#fee;color:#a00;padding:0 4px;border-radius:3px}
</style>
</head>
<body>
<h1>Verified benchmark history</h1>
<section data-section="summary">
<p>Repository <code>{{.H.Repository}}</code>: {{len .H.Releases}} release(s) verified and drawn, {{len .H.Excluded}} left out, {{len .H.Series}} series.
Only releases whose signatures, subjects and policy verified are drawn: a point is a signed claim checked against the bytes the registry served, never an unverified number.
A series is one benchmark case on one kind of hardware (GPU model, driver, clocks, simulated or not); points from different hardware never share a line.
Steps between consecutive releases larger than {{pct .ThresholdPct}} are marked in red.</p>
</section>
<section data-section="excluded">
<h2>Left out</h2>
{{if .H.Excluded}}<ul>{{range .H.Excluded}}<li class="excluded"><code>{{.Tag}}</code>: {{.Reason}}</li>{{end}}</ul>{{else}}<p>None: every release listed verified.</p>{{end}}
</section>
<section data-section="series">
<h2>Series</h2>
{{range .Charts}}<figure data-chart="series">
<figcaption>{{.Series.Key.Step}}/{{.Series.Key.Case}} on {{.Series.Key.GPU}}{{if .Series.Key.Driver}}, driver {{.Series.Key.Driver}}{{end}}, clocks {{.Series.Key.Clocks}}{{if .Series.Key.Simulated}} <span class="sim">SIMULATED</span>{{end}}</figcaption>
{{.SVG}}
{{if .Marks}}<ul>{{range .Marks}}<li class="mark" data-role="step">{{.Text}}</li>{{end}}</ul>{{end}}
<details><summary>{{len .Series.Points}} point(s)</summary><table><tr><th>release</th><th>run</th><th>median (ns)</th><th>CI (ns)</th><th>throughput</th><th>roofline</th><th>manifest</th><th>bundle</th></tr>
{{range .Series.Points}}<tr><td>{{.Tag}}</td><td>{{.RunID}}</td><td>{{printf "%.6g" .MedianNS}}</td><td>{{printf "%.6g" .CILowNS}} – {{printf "%.6g" .CIHighNS}}</td><td>{{with .Throughput}}{{printf "%.4g" .Value}} {{.Unit}}{{end}}</td><td>{{with .RooflinePercent}}{{pct .}}{{end}}</td><td><code>{{.Manifest}}</code></td><td><code>{{.Bundle}}</code></td></tr>
{{end}}</table></details>
</figure>
{{else}}<p>No benchmark case in any verified release.</p>{{end}}
</section>
<section data-section="releases">
<h2>Releases drawn</h2>
<p>In signed order: by the finish time and id of each release's first signed run, never by tag. A tag is the registry's word; the run is the signer's.</p>
<table><tr><th>tags</th><th>signed runs (id, finished, hardware)</th><th>manifest</th><th>validation bundles</th></tr>
{{range .H.Releases}}<tr data-release="{{.Manifest}}"><td>{{range $i, $t := .Tags}}{{if $i}}, {{end}}{{$t}}{{end}}{{range .Flags}}<div class="excluded" data-role="flag">{{.}}</div>{{end}}</td><td>{{range .Runs}}<div>{{if .RunID}}{{.RunID}}{{else}}(no run id){{end}}, {{.FinishedAt.Format "2006-01-02 15:04"}}{{with .SignedAt}} (signed {{.Format "2006-01-02 15:04"}}){{end}}, {{.Hardware}}</div>{{end}}</td><td><code>{{.Manifest}}</code></td><td>{{range .Runs}}<div><code>{{.Bundle}}</code></div>{{end}}</td></tr>
{{end}}</table>
</section>
</body>
</html>
`))
})
