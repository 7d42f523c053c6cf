package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// Chart sizes, in points (the SVG's user units).
const (
	wideW   = 760
	wideH   = 240
	caseW   = 360
	caseH   = 250
	seriesW = 370
	seriesH = 220
)

// maxPoints bounds the raw points a distribution chart draws per side,
// and maxSeries the points of one line of a time series: beyond them the
// chart thins the data (the statistics always use every sample).
const (
	maxPoints = 400
	maxSeries = 900
)

// Colours with a meaning, used the same way in every chart and the page.
var (
	colCandidate = color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	colReference = color.NRGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff} // grey
	colPassed    = color.NRGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colCached    = color.NRGBA{R: 0xa6, G: 0xdb, B: 0xa0, A: 0xff}
	colFailed    = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colSkipped   = color.NRGBA{R: 0xc7, G: 0xc7, B: 0xc7, A: 0xff}
	colRunning   = color.NRGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colThrottle  = color.NRGBA{R: 0xff, G: 0xa5, B: 0x00, A: 0x50}
	colXid       = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colECC       = color.NRGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	colFit       = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	// colGPU tells GPUs apart in telemetry charts (tab10).
	colGPU = []color.NRGBA{
		{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
		{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
	}
)

// chart is one figure: a plot, its size and names.
type chart struct {
	// File is the PNG's file name without extension (also the SVG's id).
	File string
	// Title is the figure's caption.
	Title string
	p     *plot.Plot
	w, h  vg.Length
}

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// newPlot returns a plot whose text is set in a sans-serif face at sizes
// that stay readable when the figure is scaled to a page column.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 12)
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 10)
	}
	p.Legend.TextStyle.Font = font.From(sans, 10)
	p.Legend.Top = true
	p.Legend.ThumbnailWidth = vg.Points(14)
	p.X.Tick.Marker = precTicks{}
	p.Y.Tick.Marker = precTicks{}
	return p
}

// precTicks are gonum's default ticks labelled with as many decimals as
// the spacing of the labelled ticks needs, so that neighbours never read
// the same (72.1 and 72.2 MiB, not 72 and 72).
type precTicks struct{}

func (precTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var major []float64
	for _, t := range ticks {
		if t.Label != "" {
			major = append(major, t.Value)
		}
	}
	if len(major) < 2 {
		return ticks
	}
	step := math.Abs(major[1] - major[0])
	dec := 0
	if step > 0 && step < 1 {
		dec = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	// More decimals while a label would not say its value (0.25, not 0.2).
	for ; dec < 12; dec++ {
		exact := true
		for _, v := range major {
			f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', dec, 64), 64)
			if math.Abs(f-v) > step*1e-6 {
				exact = false
				break
			}
		}
		if exact {
			break
		}
	}
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', dec, 64)
		}
	}
	return ticks
}

// svgHeader is what vgsvg writes before the root element's attributes.
var svgHeader = lazyregexp.New(`(?s)^.*?<svg width="[^"]*" height="[^"]*"`)

// svg renders c as an SVG element to inline in HTML: no XML prologue, its
// size in CSS pixels, the font with fallbacks. Text in it is escaped by
// vgsvg (html.EscapeString).
func (c *chart) svg() (string, error) {
	cv := vgsvg.NewWith(vgsvg.UseWH(c.w, c.h))
	c.p.Draw(draw.New(cv))
	var b bytes.Buffer
	if _, err := cv.WriteTo(&b); err != nil {
		return "", fmt.Errorf("rendering chart %s: %w", c.File, err)
	}
	out := svgHeader.ReplaceAllLiteralString(b.String(),
		fmt.Sprintf(`<svg class="chart" role="img" aria-label="%s" width="%.0f" height="%.0f"`, htmlAttr(c.Title), c.w.Points(), c.h.Points()))
	out = strings.ReplaceAll(out, "font-family:Liberation Sans;", "font-family:Liberation Sans,Arial,Helvetica,sans-serif;")
	return out, nil
}

// png renders c as a PNG at 2 pixels per point.
func (c *chart) png() ([]byte, error) {
	cv := vgimg.NewWith(vgimg.UseWH(c.w, c.h), vgimg.UseDPI(144), vgimg.UseBackgroundColor(color.White))
	c.p.Draw(draw.New(cv))
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: cv}).WriteTo(&b); err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", c.File, err)
	}
	return b.Bytes(), nil
}

func htmlAttr(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}

// fileName makes a safe PNG name from parts.
func fileName(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('-')
		}
		for _, r := range p {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.':
				b.WriteRune(r)
			default:
				b.WriteByte('_')
			}
		}
	}
	s := b.String()
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

// timeUnit picks the unit a duration axis reads best in.
func timeUnit(maxNS float64) (div float64, unit string) {
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

// secondsAxis picks minutes for long spans.
func secondsAxis(span float64) (div float64, label string) {
	if span > 600 {
		return 60, "min"
	}
	return 1, "s"
}

// bytesUnit picks MiB or GiB.
func bytesUnit(max float64) (div float64, unit string) {
	switch {
	case max >= 4<<30:
		return 1 << 30, "GiB"
	case max >= 1<<20:
		return 1 << 20, "MiB"
	}
	return 1 << 10, "KiB"
}

// gantt draws steps as horizontal bars on a time axis.
type gantt struct {
	rows []ganttRow
}

type ganttRow struct {
	y          float64
	start, end float64
	col        color.Color
	label      string
}

func (g *gantt) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for _, r := range g.rows {
		y0, y1 := trY(r.y-0.35), trY(r.y+0.35)
		x0, x1 := trX(r.start), trX(r.end)
		if x1-x0 < 2 {
			x1 = x0 + 2
		}
		pts := c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		c.FillPolygon(r.col, pts)
		if r.label != "" {
			sty := draw.TextStyle{Color: color.Black, Font: font.From(sans, 9), Handler: plot.DefaultTextHandler, YAlign: draw.YCenter}
			c.FillText(sty, vg.Point{X: x1 + 3, Y: (y0 + y1) / 2}, r.label)
		}
	}
}

func (g *gantt) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = 0, -0.5
	for _, r := range g.rows {
		xmax = max(xmax, r.end)
		ymax = max(ymax, r.y+0.5)
	}
	if xmax == 0 {
		xmax = 1
	}
	// Room for the labels right of the last bar.
	return xmin, xmax * 1.18, ymin, ymax
}

func stateColor(s Step) color.Color {
	switch {
	case s.Cache == "hit":
		return colCached
	case s.State == "passed":
		return colPassed
	case s.State == "failed", s.State == "error", s.State == "interrupted":
		return colFailed
	case s.State == "running":
		return colRunning
	}
	return colSkipped
}

// timelineChart is the Gantt chart of the run's steps; nil when no step
// has times.
func timelineChart(steps []Step) *chart {
	var t0 time.Time
	for _, s := range steps {
		if !s.Start.IsZero() && (t0.IsZero() || s.Start.Before(t0)) {
			t0 = s.Start
		}
	}
	if t0.IsZero() {
		return nil
	}
	var span float64
	for _, s := range steps {
		if !s.End.IsZero() {
			span = max(span, s.End.Sub(t0).Seconds())
		}
	}
	div, unit := secondsAxis(span)
	g := &gantt{}
	names := make([]string, len(steps))
	n := len(steps)
	for i, s := range steps {
		y := float64(n - 1 - i) // first step on top
		names[n-1-i] = s.ID
		if s.Start.IsZero() {
			g.rows = append(g.rows, ganttRow{y: y, col: colSkipped, label: s.State})
			continue
		}
		end := s.End
		if end.IsZero() {
			end = s.Start.Add(s.Duration)
		}
		label := fmtDur(end.Sub(s.Start))
		if s.Cache == "hit" {
			label += " (cache hit)"
		}
		if s.State != "passed" {
			label += " " + s.State
		}
		g.rows = append(g.rows, ganttRow{y: y, start: s.Start.Sub(t0).Seconds() / div, end: end.Sub(t0).Seconds() / div, col: stateColor(s), label: label})
	}
	p := newPlot("", "time since the run started ("+unit+")", "")
	p.Add(g)
	p.NominalY(names...)
	p.Add(plotter.NewGrid())
	h := vg.Points(float64(60 + 22*n))
	return &chart{File: "timeline", Title: "Step timeline", p: p, w: wideW, h: h}
}

// swatch is a filled square legend thumbnail.
type swatch struct{ col color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(s.col, pts)
}

// thin returns at most n of xs, evenly spaced, keeping the first and last.
func thin(xs []float64, n int) []float64 {
	if len(xs) <= n {
		return xs
	}
	out := make([]float64, 0, n)
	step := float64(len(xs)-1) / float64(n-1)
	for i := 0; i < n; i++ {
		out = append(out, xs[int(math.Round(float64(i)*step))])
	}
	return out
}

// jitter places values at x with a deterministic spread, so that equal
// values do not hide each other.
func jitter(vals []float64, x, width, div float64) plotter.XYs {
	xys := make(plotter.XYs, len(vals))
	for i, v := range vals {
		// A low-discrepancy sequence: spread without randomness.
		f := math.Mod(float64(i)*0.6180339887, 1) - 0.5
		xys[i] = plotter.XY{X: x + f*width, Y: v / div}
	}
	return xys
}

// caseChart is a benchmark case's sample distribution: a box of the
// reference's samples (when there are any) beside the candidate's, with
// the raw points, and the baseline's median as a line when only it is
// known.
func caseChart(step string, c BenchCase) *chart {
	if len(c.Samples) == 0 && len(c.Against) == 0 {
		return nil
	}
	lo, hi, above := yRange(c.Samples, c.Against, c.AgainstMedian)
	div, unit := timeUnit(hi)
	p := newPlot(c.Name, "", "time per iteration ("+unit+")")
	var names []string
	type side struct {
		name string
		vals []float64
		col  color.NRGBA
	}
	var sides []side
	if len(c.Against) > 0 {
		sides = append(sides, side{"reference", c.Against, colReference})
	}
	if len(c.Samples) > 0 {
		sides = append(sides, side{"candidate", c.Samples, colCandidate})
	}
	for i, s := range sides {
		vals := make(plotter.Values, len(s.vals))
		for j, v := range s.vals {
			vals[j] = v / div
		}
		box, err := plotter.NewBoxPlot(vg.Points(46), float64(i), vals)
		if err != nil {
			continue
		}
		box.BoxStyle.Color, box.MedianStyle.Color, box.WhiskerStyle.Color = s.col, s.col, s.col
		box.MedianStyle.Width = vg.Points(2)
		box.WhiskerStyle.Dashes = nil
		box.GlyphStyle.Radius = 0 // outliers are drawn as raw points below
		pts := append([]float64(nil), s.vals...)
		sort.Float64s(pts)
		sc, err := plotter.NewScatter(jitter(thin(pts, maxPoints), float64(i)+0.38, 0.16, div))
		if err == nil {
			sc.GlyphStyle.Color = withAlpha(s.col, 0x90)
			sc.GlyphStyle.Radius = vg.Points(1.6)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
		}
		p.Add(box)
		names = append(names, fmt.Sprintf("%s (n=%d)", s.name, len(s.vals)))
	}
	if len(c.Against) == 0 && c.AgainstMedian > 0 {
		p.Add(hline{y: c.AgainstMedian / div, col: colReference, label: "baseline median"})
	}
	// A few slow outliers (a descheduled process) would squash the boxes
	// into a line: the axis ends at the farthest fence of either side, and
	// the samples beyond it are counted on the chart.
	if hi > lo {
		p.Y.Min, p.Y.Max = lo/div, hi/div
		if above > 0 {
			p.Add(note{text: fmt.Sprintf("%d slower samples above %s not shown", above, fmtNS(hi))})
		}
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(sides))-0.25
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	return &chart{File: fileName("bench", step, c.Name), Title: "benchmark " + step + ": " + c.Name, p: p, w: caseW, h: caseH}
}

// yRange is the y axis of a distribution chart: from just below the
// fastest sample to the farthest upper fence (Q3 + 3 IQR) of either side,
// and how many samples lie above it.
func yRange(a, b []float64, ref float64) (lo, hi float64, above int) {
	lo, hi = math.Inf(1), 0
	var all [][]float64
	for _, xs := range [][]float64{a, b} {
		if len(xs) == 0 {
			continue
		}
		all = append(all, xs)
		q1, q3 := stats.Quantile(xs, 0.25), stats.Quantile(xs, 0.75)
		lo = min(lo, slices.Min(xs))
		hi = max(hi, min(slices.Max(xs), q3+3*(q3-q1)))
	}
	if ref > 0 {
		lo, hi = min(lo, ref), max(hi, ref)
	}
	if len(all) == 0 || math.IsInf(lo, 1) {
		return 0, 0, 0
	}
	pad := (hi - lo) * 0.06
	if pad == 0 {
		pad = hi * 0.05
	}
	for _, xs := range all {
		for _, v := range xs {
			if v > hi+pad {
				above++
			}
		}
	}
	return max(0, lo-pad), hi + pad, above
}

// note is a line of text at the top left of the data area.
type note struct {
	text   string
	col    color.Color // grey when nil
	bottom bool        // at the bottom left instead of the top left
}

func (n note) Plot(c draw.Canvas, plt *plot.Plot) {
	col := n.col
	if col == nil {
		col = color.NRGBA{R: 0x57, G: 0x60, B: 0x6a, A: 0xff}
	}
	ts := draw.TextStyle{Color: col, Font: font.From(sans, 8.5), Handler: plot.DefaultTextHandler, XAlign: draw.XLeft, YAlign: draw.YTop}
	pt := vg.Point{X: c.Min.X + 3, Y: c.Max.Y - 2}
	if n.bottom {
		ts.YAlign = draw.YBottom
		pt.Y = c.Min.Y + 2
	}
	c.FillText(ts, pt, n.text)
}

func withAlpha(c color.NRGBA, a uint8) color.NRGBA {
	c.A = a
	return c
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// hline is a labelled horizontal line across the data area.
type hline struct {
	y     float64
	col   color.Color
	label string
}

func (h hline) Plot(c draw.Canvas, plt *plot.Plot) {
	_, trY := plt.Transforms(&c)
	y := trY(h.y)
	sty := draw.LineStyle{Color: h.col, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	c.StrokeLine2(sty, c.Min.X, y, c.Max.X, y)
	ts := draw.TextStyle{Color: h.col, Font: font.From(sans, 9), Handler: plot.DefaultTextHandler, XAlign: draw.XRight, YAlign: draw.YBottom}
	c.FillText(ts, vg.Point{X: c.Max.X - 2, Y: y + 2}, h.label)
}

func (h hline) DataRange() (xmin, xmax, ymin, ymax float64) {
	return math.Inf(1), math.Inf(-1), h.y, h.y
}

// seriesChart is a per-iteration series with its least-squares line.
func seriesChart(file, title, ylabel string, ys []float64, div float64, slope *float64, slopeLabel string) *chart {
	if len(ys) == 0 {
		return nil
	}
	p := newPlot(title, "iteration", ylabel)
	xys := make(plotter.XYs, len(ys))
	for i, v := range ys {
		xys[i] = plotter.XY{X: float64(i + 1), Y: v / div}
	}
	shown := thinXY(xys, maxSeries)
	l, err := plotter.NewLine(shown)
	if err != nil {
		return nil
	}
	l.LineStyle.Color, l.LineStyle.Width = colCandidate, vg.Points(1.2)
	p.Add(l)
	if len(shown) <= 120 {
		if sc, err := plotter.NewScatter(shown); err == nil {
			sc.GlyphStyle.Color, sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = colCandidate, vg.Points(1.8), draw.CircleGlyph{}
			p.Add(sc)
		}
	}
	if slope != nil {
		// The fitted line through the series' mean at its middle.
		var mean float64
		for _, v := range ys {
			mean += v
		}
		mean /= float64(len(ys))
		mid := float64(len(ys)+1) / 2
		a := plotter.XY{X: 1, Y: (mean + *slope*(1-mid)) / div}
		b := plotter.XY{X: float64(len(ys)), Y: (mean + *slope*(float64(len(ys))-mid)) / div}
		if fit, err := plotter.NewLine(plotter.XYs{a, b}); err == nil {
			fit.LineStyle.Color, fit.LineStyle.Width = colFit, vg.Points(1.2)
			fit.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(fit)
			p.Add(note{text: "dashed: " + slopeLabel, col: colFit})
		}
	}
	p.Add(plotter.NewGrid())
	padY(p, 0)
	return &chart{File: file, Title: title, p: p, w: seriesW, h: seriesH}
}

// padY widens a flat y range so that a constant series is not drawn on
// the axis, and leaves room above for the legend.
func padY(p *plot.Plot, legendRows int) {
	lo, hi := p.Y.Min, p.Y.Max
	if hi-lo < 1e-9*max(1, math.Abs(hi)) {
		d := max(math.Abs(hi)*0.05, 1)
		lo, hi = lo-d, hi+d
	}
	head := 0.22 + 0.1*float64(legendRows)
	p.Y.Min, p.Y.Max = lo-(hi-lo)*0.12, hi+(hi-lo)*head
}

// thinXY keeps at most n points of a line: per bucket the lowest and the
// highest, so that spikes survive.
func thinXY(xys plotter.XYs, n int) plotter.XYs {
	if len(xys) <= n {
		return xys
	}
	buckets := n / 2
	per := float64(len(xys)) / float64(buckets)
	out := make(plotter.XYs, 0, n+2)
	for b := 0; b < buckets; b++ {
		lo, hi := int(float64(b)*per), int(float64(b+1)*per)
		if hi > len(xys) {
			hi = len(xys)
		}
		if lo >= hi {
			continue
		}
		imin, imax := lo, lo
		for i := lo; i < hi; i++ {
			if xys[i].Y < xys[imin].Y {
				imin = i
			}
			if xys[i].Y > xys[imax].Y {
				imax = i
			}
		}
		first, second := min(imin, imax), max(imin, imax)
		out = append(out, xys[first])
		if second != first {
			out = append(out, xys[second])
		}
	}
	return out
}

// burninCharts are a burn-in's series: time per iteration, host RSS and
// device memory, each memory series with its fitted slope.
func burninCharts(b Burnin) []*chart {
	d := b.Details
	if d == nil {
		return nil
	}
	var out []*chart
	if len(d.IterationSeconds) > 0 {
		if c := seriesChart(fileName("burnin", b.Step, "iteration"), "time per iteration", "seconds", d.IterationSeconds, 1, nil, ""); c != nil {
			out = append(out, c)
		}
	}
	for _, m := range []struct {
		name, file string
		t          *suite.Trend
	}{{"host RSS (peak per iteration)", "rss", d.HostRSS}, {"device memory used", "devmem", d.DeviceMemory}} {
		if m.t == nil || len(m.t.Series) == 0 {
			continue
		}
		ys := make([]float64, len(m.t.Series))
		for i, v := range m.t.Series {
			ys[i] = float64(v)
		}
		div, unit := bytesUnit(maxOf(ys))
		label := ""
		if m.t.SlopePerIteration != nil {
			label = fmt.Sprintf("slope %s/iteration (tolerance %s)", fmtBytes(*m.t.SlopePerIteration), fmtBytes(float64(d.LeakToleranceBytes)))
		}
		if c := seriesChart(fileName("burnin", b.Step, m.file), m.name, unit, ys, div, m.t.SlopePerIteration, label); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// band shades time intervals across the data area (throttling).
type band struct {
	spans [][2]float64
	col   color.Color
}

func (bd band) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	for _, s := range bd.spans {
		x0, x1 := trX(s[0]), trX(s[1])
		if x1-x0 < 1 {
			x1 = x0 + 1
		}
		pts := c.ClipPolygonX([]vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
		c.FillPolygon(bd.col, pts)
	}
}

// marks draws labelled vertical lines at event times (Xid, ECC).
type marks struct {
	at    []float64
	text  []string
	col   color.Color
	label bool
}

func (m marks) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	sty := draw.LineStyle{Color: m.col, Width: vg.Points(1.2)}
	ts := draw.TextStyle{Color: m.col, Font: font.From(sans, 8), Handler: plot.DefaultTextHandler, XAlign: draw.XLeft, YAlign: draw.YTop}
	lastX := vg.Length(math.Inf(-1))
	for i, t := range m.at {
		x := trX(t)
		if !c.ContainsX(x) {
			continue
		}
		c.StrokeLine2(sty, x, c.Min.Y, x, c.Max.Y)
		// Label only where it does not run into the previous one.
		if m.label && x-lastX > 40 {
			c.FillText(ts, vg.Point{X: x + 2, Y: c.Max.Y - 2}, m.text[i])
			lastX = x
		}
	}
}

// telemetrySeries is one metric of the telemetry per GPU.
type telemetrySeries struct {
	name, unit, file string
	get              func(runtypes.TelemetryLine) (float64, bool)
}

var telemetryMetrics = []telemetrySeries{
	{"GPU temperature", "°C", "temp", func(l runtypes.TelemetryLine) (float64, bool) {
		if l.TemperatureC == nil {
			return 0, false
		}
		return float64(*l.TemperatureC), true
	}},
	{"board power", "W", "power", func(l runtypes.TelemetryLine) (float64, bool) {
		if l.PowerWatts == nil {
			return 0, false
		}
		return *l.PowerWatts, true
	}},
	{"SM clock", "MHz", "smclock", func(l runtypes.TelemetryLine) (float64, bool) {
		if l.SMClockMHz == nil {
			return 0, false
		}
		return float64(*l.SMClockMHz), true
	}},
}

// telemetryEvents are a step's telemetry lines laid out for charts:
// the time axis, the GPUs, throttled spans and Xid/ECC marks.
type telemetryEvents struct {
	t0               time.Time
	div              float64 // seconds per axis unit
	unit             string
	ids              []int // the GPUs with samples, sorted
	spans            [][2]float64
	xidAt, eccAt     []float64
	xidText, eccText []string
}

func (e *telemetryEvents) at(l runtypes.TelemetryLine) float64 {
	return l.Time.Sub(e.t0).Seconds() / e.div
}

// layoutTelemetry lays out t's lines; nil when there are none.
func layoutTelemetry(t Telemetry) *telemetryEvents {
	var t0, t1 time.Time
	for _, l := range t.Lines {
		if t0.IsZero() || l.Time.Before(t0) {
			t0 = l.Time
		}
		if l.Time.After(t1) {
			t1 = l.Time
		}
	}
	if t0.IsZero() {
		return nil
	}
	e := &telemetryEvents{t0: t0}
	e.div, e.unit = secondsAxis(t1.Sub(t0).Seconds())
	// Throttled spans per GPU, merged over GPUs: a sample marks the time
	// from it to the next sample of its GPU.
	last := map[int]runtypes.TelemetryLine{}
	gpus := map[int]bool{}
	for _, l := range t.Lines {
		switch l.Kind {
		case "sample":
			gpus[l.GPU] = true
			if prev, ok := last[l.GPU]; ok && prev.Throttled {
				e.spans = append(e.spans, [2]float64{e.at(prev), e.at(l)})
			}
			last[l.GPU] = l
		case "xid":
			e.xidAt = append(e.xidAt, e.at(l))
			code := ""
			if l.Xid != nil {
				code = fmt.Sprint(*l.Xid)
			}
			e.xidText = append(e.xidText, fmt.Sprintf("Xid %s (GPU %d)", code, l.GPU))
		case "ecc_dbe":
			e.eccAt = append(e.eccAt, e.at(l))
			e.eccText = append(e.eccText, fmt.Sprintf("ECC DBE (GPU %d)", l.GPU))
		}
	}
	e.spans = mergeSpans(e.spans)
	for g := range gpus {
		e.ids = append(e.ids, g)
	}
	sort.Ints(e.ids)
	return e
}

// telemetryCharts are a step's telemetry series: temperature, power and
// SM clock per GPU against time, throttled intervals shaded, Xid and ECC
// events marked.
func telemetryCharts(t Telemetry) []*chart {
	e := layoutTelemetry(t)
	if e == nil {
		return nil
	}
	var out []*chart
	for _, m := range telemetryMetrics {
		if c := e.metricChart(t, m); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// metricChart is one metric's chart; nil when no GPU reports it.
func (e *telemetryEvents) metricChart(t Telemetry, m telemetrySeries) *chart {
	p := newPlot(m.name, "time since the step started ("+e.unit+")", m.unit)
	if len(e.spans) > 0 {
		p.Add(band{spans: e.spans, col: colThrottle})
	}
	any := false
	for k, g := range e.ids {
		var xys plotter.XYs
		for _, l := range t.Lines {
			if l.Kind != "sample" || l.GPU != g {
				continue
			}
			if v, ok := m.get(l); ok {
				xys = append(xys, plotter.XY{X: e.at(l), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(thinXY(xys, maxSeries))
		if err != nil {
			continue
		}
		line.LineStyle.Color, line.LineStyle.Width = colGPU[k%len(colGPU)], vg.Points(1.2)
		p.Add(line)
		if len(e.ids) > 1 {
			p.Legend.Add(fmt.Sprintf("GPU %d", g), line)
		}
		any = true
	}
	if !any {
		return nil
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(4)
	if len(e.xidAt) > 0 {
		p.Add(marks{at: e.xidAt, text: e.xidText, col: colXid, label: true})
	}
	if len(e.eccAt) > 0 {
		p.Add(marks{at: e.eccAt, text: e.eccText, col: colECC, label: true})
	}
	if len(e.spans) > 0 {
		p.Add(note{text: "shaded: throttled (power, thermal or HW slowdown)", col: color.NRGBA{R: 0xb2, G: 0x6a, A: 0xff}, bottom: true})
	}
	p.X.Min = 0
	p.Add(plotter.NewGrid())
	rows := 0
	if len(e.ids) > 1 {
		rows = len(e.ids)
	}
	padY(p, rows)
	return &chart{File: fileName("telemetry", t.Step, m.file), Title: m.name + " (" + m.unit + ")", p: p, w: seriesW, h: seriesH}
}

// mergeSpans sorts and merges overlapping intervals.
func mergeSpans(s [][2]float64) [][2]float64 {
	if len(s) == 0 {
		return nil
	}
	sort.Slice(s, func(i, j int) bool { return s[i][0] < s[j][0] })
	out := [][2]float64{s[0]}
	for _, x := range s[1:] {
		lastSpan := &out[len(out)-1]
		if x[0] <= lastSpan[1] {
			lastSpan[1] = max(lastSpan[1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

func fmtBytes(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.2f MiB", v/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}
