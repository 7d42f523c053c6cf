package history

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"strings"
)

// BMF is Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format/):
// benchmark name -> measure slug -> metric.
type BMF map[string]map[string]Metric

// Metric is one BMF metric.
type Metric struct {
	// Value is the figure; LowerValue and UpperValue bound it (the
	// confidence interval of a median), when known.
	Value      float64  `json:"value"`
	LowerValue *float64 `json:"lower_value,omitempty"`
	UpperValue *float64 `json:"upper_value,omitempty"`
}

// BMFByRelease returns one BMF document per verified release, keyed by
// tag. A benchmark's name is its series key (step/case on the hardware),
// so that Bencher never joins different hardware either; its measures
// are latency (the median in nanoseconds, the confidence interval as
// its bounds), throughput-gb-s or throughput-gflop-s, and
// roofline-percent, where the release has them.
func (h *History) BMFByRelease() map[string]BMF {
	out := map[string]BMF{}
	for _, r := range h.Releases {
		out[r.Tag] = BMF{}
	}
	for _, s := range h.Series {
		name := s.Key.String()
		for _, p := range s.Points {
			doc, ok := out[p.Tag]
			if !ok {
				continue
			}
			lo, hi := p.CILowNS, p.CIHighNS
			m := map[string]Metric{"latency": {Value: p.MedianNS, LowerValue: &lo, UpperValue: &hi}}
			if p.Throughput != nil {
				m["throughput-"+slug(p.Throughput.Unit)] = Metric{Value: p.Throughput.Value}
			}
			if p.RooflinePercent != nil {
				m["roofline-percent"] = Metric{Value: *p.RooflinePercent}
			}
			doc[name] = m
		}
	}
	return out
}

// slug turns a unit into a measure slug part ("GB/s" -> "gb-s").
func slug(unit string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(unit) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// WriteBMF writes BMFByRelease as one JSON object, keyed by tag.
func (h *History) WriteBMF(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(h.BMFByRelease())
}

// csvHeader names WriteCSV's columns.
var csvHeader = []string{"series", "step", "case", "gpu", "driver", "clocks", "simulated", "tag", "manifest", "bundle",
	"median_ns", "ci_low_ns", "ci_high_ns", "throughput", "throughput_unit", "roofline_percent", "step_from_previous"}

// WriteCSV writes one row per point: its series key, release, figures,
// and the relative step from the series' previous point when it is
// marked.
func (h *History) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, s := range h.Series {
		marked := map[int]float64{}
		for _, m := range s.Marks {
			marked[m.To] = m.Delta
		}
		for i, p := range s.Points {
			row := []string{csvSafe(s.Key.String()), csvSafe(s.Key.Step), csvSafe(s.Key.Case), csvSafe(s.Key.GPU), csvSafe(s.Key.Driver), s.Key.Clocks,
				strconv.FormatBool(s.Key.Simulated), csvSafe(p.Tag), p.Manifest, p.Bundle, f(p.MedianNS), f(p.CILowNS), f(p.CIHighNS), "", "", "", ""}
			if p.Throughput != nil {
				row[13], row[14] = f(p.Throughput.Value), csvSafe(p.Throughput.Unit)
			}
			if p.RooflinePercent != nil {
				row[15] = f(*p.RooflinePercent)
			}
			if d, ok := marked[i]; ok {
				row[16] = f(d)
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// WriteJSON writes h as indented JSON.
func (h *History) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(h)
}
