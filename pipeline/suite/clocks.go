package suite

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// The config keys a suite sets on a case to say when its timed samples
// ran (Unix nanoseconds, after the warm-up): the benchmark step reads
// the telemetry taken around that window. They vary between
// invocations, so the merged case's config leaves them out.
const (
	ConfigSampledFrom = "sampled_from_unix_ns"
	ConfigSampledTo   = "sampled_to_unix_ns"
)

// CaseClocks are the GPU's clocks and clock-event reasons around one
// benchmark case's samples: the telemetry samples inside its sampling
// windows (one per invocation) and the nearest one before and after
// each.
type CaseClocks struct {
	// Samples counts the telemetry samples used.
	Samples int `json:"samples"`
	// SMMinMHz and SMMaxMHz span the SM clock; MemMinMHz and MemMaxMHz
	// the memory clock.
	SMMinMHz  *uint32 `json:"sm_min_mhz,omitempty"`
	SMMaxMHz  *uint32 `json:"sm_max_mhz,omitempty"`
	MemMinMHz *uint32 `json:"mem_min_mhz,omitempty"`
	MemMaxMHz *uint32 `json:"mem_max_mhz,omitempty"`
	// Reasons counts the samples per clock-event reason.
	Reasons map[string]int `json:"reasons,omitempty"`
	// Throttled counts samples with a slowdown (HW slowdown, thermal,
	// power brake); PowerCapped samples at the software power cap.
	Throttled   int `json:"throttled,omitempty"`
	PowerCapped int `json:"power_capped,omitempty"`
}

// window is one invocation's sampling window of a case.
type window struct{ from, to int64 }

// caseWindow reads a case's sampling window from its config.
func caseWindow(cfg map[string]string) (window, bool) {
	from, err1 := strconv.ParseInt(cfg[ConfigSampledFrom], 10, 64)
	to, err2 := strconv.ParseInt(cfg[ConfigSampledTo], 10, 64)
	return window{from, to}, err1 == nil && err2 == nil && from > 0 && to >= from
}

// maxClockLines bounds the telemetry lines a benchmark step reads.
const maxClockLines = 1 << 20

// readClockLines reads the step's telemetry samples of GPU gpu (every
// GPU when gpu < 0), in time order; nil without telemetry.
func readClockLines(stepDir string, gpu int) ([]runtypes.TelemetryLine, error) {
	f, err := os.Open(filepath.Join(stepDir, telemetryFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []runtypes.TelemetryLine
	err = scanSamples(f, maxClockLines, func(l runtypes.TelemetryLine) {
		if gpu < 0 || l.GPU == gpu {
			out = append(out, l)
		}
	})
	slices.SortStableFunc(out, func(a, b runtypes.TelemetryLine) int { return a.Time.Compare(b.Time) })
	return out, err
}

// caseClocks summarises lines (in time order) around the windows: every
// line inside one, and the last before and the first after it.
func caseClocks(lines []runtypes.TelemetryLine, windows []window) *CaseClocks {
	pick := map[int]bool{}
	for _, w := range windows {
		from, to := time.Unix(0, w.from), time.Unix(0, w.to)
		lo, _ := slices.BinarySearchFunc(lines, from, func(l runtypes.TelemetryLine, t time.Time) int { return l.Time.Compare(t) })
		hi, _ := slices.BinarySearchFunc(lines, to, func(l runtypes.TelemetryLine, t time.Time) int {
			if l.Time.After(t) {
				return 1
			}
			return -1
		})
		for i := max(0, lo-1); i <= min(len(lines)-1, hi); i++ {
			pick[i] = true
		}
	}
	if len(pick) == 0 {
		return nil
	}
	c := &CaseClocks{}
	for i := range pick {
		l := lines[i]
		c.Samples++
		c.SMMinMHz, c.SMMaxMHz = minU32(c.SMMinMHz, l.SMClockMHz), maxU32(c.SMMaxMHz, l.SMClockMHz)
		c.MemMinMHz, c.MemMaxMHz = minU32(c.MemMinMHz, l.MemClockMHz), maxU32(c.MemMaxMHz, l.MemClockMHz)
		for _, r := range l.ClockEventReasons {
			if c.Reasons == nil {
				c.Reasons = map[string]int{}
			}
			c.Reasons[r]++
		}
		if l.Throttled {
			c.Throttled++
		}
		if l.PowerCapped {
			c.PowerCapped++
		}
	}
	return c
}

func minU32(cur, v *uint32) *uint32 {
	if v == nil || (cur != nil && *cur <= *v) {
		return cur
	}
	return &[]uint32{*v}[0]
}

func maxU32(cur, v *uint32) *uint32 {
	if v == nil || (cur != nil && *cur >= *v) {
		return cur
	}
	return &[]uint32{*v}[0]
}

// clocks records each candidate case's clocks from the step's telemetry,
// of the GPU the results name (through the hardware record; every GPU
// when it names none the record has).
func (br *benchRun) clocks() {
	gpu := -1
	if rec := br.s.Hardware; rec != nil && br.d.DeviceUUID != "" {
		for _, g := range rec.GPUs {
			if strings.EqualFold(g.UUID, br.d.DeviceUUID) {
				gpu = g.Index
			}
		}
	}
	lines, err := readClockLines(br.s.StepDir, gpu)
	if err != nil {
		br.s.Logger.Warn("telemetry not read for the cases' clocks", "err", err)
	}
	if len(lines) == 0 {
		return
	}
	for i := range br.d.Cases {
		c := &br.d.Cases[i]
		c.Clocks = caseClocks(lines, c.windows)
	}
}
