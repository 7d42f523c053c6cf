package history

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"
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
// its tag (Release.Tag). A benchmark's name is its series key (step/case
// on the hardware), so that Bencher never joins different hardware
// either; a second run of the release on the same hardware adds
// " (run RUN_ID)" to it. Its measures are latency (the median in
// nanoseconds, the confidence interval as its bounds), throughput-gb-s
// or throughput-gflop-s, and roofline-percent, where the release has
// them.
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
			n := name
			if _, dup := doc[n]; dup {
				n += " (run " + p.RunID + ")"
			}
			doc[n] = m
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

// WriteBMF writes BMFByRelease as one indented JSON object, keyed by
// tag, its keys in release order (signed order, as h.Releases), which a
// map's encoding would sort as strings instead.
func (h *History) WriteBMF(w io.Writer) error {
	docs := h.BMFByRelease()
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, r := range h.Releases {
		if i > 0 {
			buf.WriteString(",")
		}
		var kv bytes.Buffer
		enc := json.NewEncoder(&kv)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r.Tag); err != nil {
			return err
		}
		if err := enc.Encode(docs[r.Tag]); err != nil {
			return err
		}
		k, v, _ := bytes.Cut(bytes.TrimSpace(kv.Bytes()), []byte("\n"))
		buf.WriteString("\n  ")
		buf.Write(k)
		buf.WriteString(": ")
		if err := json.Indent(&buf, v, "  ", "  "); err != nil {
			return err
		}
	}
	buf.WriteString("\n}\n")
	_, err := w.Write(buf.Bytes())
	return err
}

// csvHeader names WriteCSV's columns.
var csvHeader = []string{"series", "step", "case", "gpu", "driver", "clocks", "simulated", "tag", "manifest", "bundle", "run_id", "run_finished_at",
	"median_ns", "ci_low_ns", "ci_high_ns", "throughput", "throughput_unit", "roofline_percent", "step_from_previous"}

// WriteCSV writes one row per point: its series key, release, signed
// run, figures, and the relative step from the series' previous point
// when it is marked.
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
				strconv.FormatBool(s.Key.Simulated), csvSafe(p.Tag), p.Manifest, p.Bundle, csvSafe(p.RunID), p.FinishedAt.UTC().Format(time.RFC3339),
				f(p.MedianNS), f(p.CILowNS), f(p.CIHighNS), "", "", "", ""}
			if p.Throughput != nil {
				row[15], row[16] = f(p.Throughput.Value), csvSafe(p.Throughput.Unit)
			}
			if p.RooflinePercent != nil {
				row[17] = f(*p.RooflinePercent)
			}
			if d, ok := marked[i]; ok {
				row[18] = f(d)
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
