package suite

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

var (
	deviceUUIDRE = lazyregexp.New(`^GPU-[0-9a-f-]+$`)
	sha256HexRE  = lazyregexp.New(`^[0-9a-f]{64}$`)
)

// Validate returns every problem of meaning in a decoded results file,
// each with its field path (cases[2].status): what
// schemas/results.schema.json says beyond the shape jsonstrict.Decode
// checks, and that case names are unique and samples positive.
func (r *Results) Validate() problem.List {
	var v problem.List
	oneOf(&v, "schema", r.Schema, ResultsSchemaID)
	nonEmpty(&v, "tool", r.Tool)
	oneOf(&v, "backend", r.Backend, "cuda", "cpu")
	if r.DeviceUUID != "" && !deviceUUIDRE.MatchString(r.DeviceUUID) {
		v.Add("device_uuid", "", "%q: expected GPU- and lowercase hex digits, as NVML names a GPU", r.DeviceUUID)
	}
	if r.DeviceOrdinal != nil && *r.DeviceOrdinal < 0 {
		v.Add("device_ordinal", "", "%d: expected a number >= 0", *r.DeviceOrdinal)
	}
	if s := r.Sustained; s != nil {
		s.validate(&v, "sustained")
	}
	for i, d := range r.Devices {
		if s := d.Sustained; s != nil {
			p := fmt.Sprintf("devices[%d].sustained", i)
			validateLoopWindow(&v, p, s.LoopFromUnixNS, s.LoopToUnixNS)
			if b := s.Burn; b != nil {
				b.validate(&v, p+".burn")
			}
		}
	}
	seen := map[string]int{}
	for i, c := range r.Cases {
		p := fmt.Sprintf("cases[%d]", i)
		if j, ok := seen[c.Name]; ok && c.Name != "" {
			v.Add(p+".name", "case names must be unique within a file", "%q repeats cases[%d]", c.Name, j)
		} else {
			seen[c.Name] = i
		}
		c.validate(&v, p)
	}
	return v
}

func (c *Case) validate(v *problem.List, p string) {
	nonEmpty(v, p+".name", c.Name)
	oneOf(v, p+".status", c.Status, StatusPassed, StatusFailed, StatusSkipped, StatusError)
	for k, x := range c.SamplesNS {
		if !(x > 0) {
			v.Add(fmt.Sprintf("%s.samples_ns[%d]", p, k), "", "%v is not a positive duration", x)
		}
	}
	atLeast(v, p+".flops", c.Flops, 0)
	atLeast(v, p+".bytes", c.Bytes, 0)
	atLeast(v, p+".device_memory_used_bytes", float64(c.DeviceMemoryUsedBytes), 0)
	if c.OutputSHA256 != "" && !sha256HexRE.MatchString(c.OutputSHA256) {
		v.Add(p+".output_sha256", "", "%q: expected 64 lowercase hex digits", c.OutputSHA256)
	}
	if k := c.Correctness; k != nil {
		atLeast(v, p+".correctness.max_abs_error", k.MaxAbsError, 0)
		atLeast(v, p+".correctness.mean_abs_error", k.MeanAbsError, 0)
		atLeast(v, p+".correctness.tolerance", k.Tolerance, 0)
	}
	if st := c.Stop; st != nil {
		oneOf(v, p+".stop.reason", st.Reason, StopPrecision, StopMaxTime, StopMaxSamples)
		atLeast(v, p+".stop.elapsed_s", st.ElapsedSeconds, 0)
	}
	if cs := c.Sustained; cs != nil {
		q := p + ".sustained"
		atLeast(v, q+".repeats", float64(cs.Repeats), 0)
		atLeast(v, q+".mismatches", float64(cs.Mismatches), 0)
		atLeast(v, q+".first_mismatch", float64(cs.FirstMismatch), 0)
		atLeast(v, q+".busy_s", cs.BusySeconds, 0)
	}
}

func (s *Sustained) validate(v *problem.List, p string) {
	if !(s.DurationSeconds > 0) {
		v.Add(p+".duration_s", "", "%v: expected a number > 0", s.DurationSeconds)
	}
	atLeast(v, p+".elapsed_s", s.ElapsedSeconds, 0)
	atLeast(v, p+".busy_s", s.BusySeconds, 0)
	atLeast(v, p+".duty_cycle", s.DutyCycle, 0)
	if s.DutyCycle > 1 {
		v.Add(p+".duty_cycle", "", "%v: expected a number <= 1", s.DutyCycle)
	}
	oneOf(v, p+".timing", s.Timing, TimingCUDAEvents, TimingSteadyClock)
	atLeast(v, p+".threads", float64(s.Threads), 0)
	if s.CPUSeconds != nil {
		atLeast(v, p+".cpu_s", *s.CPUSeconds, 0)
	}
	atLeast(v, p+".iterations", float64(s.Iterations), 0)
	atLeast(v, p+".outputs_checked", float64(s.OutputsChecked), 0)
	atLeast(v, p+".mismatches", float64(s.Mismatches), 0)
	oneOf(v, p+".check", s.Check, "bytes", "checksum64")
	atLeast(v, p+".memory_interval_s", s.MemoryIntervalSeconds, 0)
	validateLoopWindow(v, p, s.LoopFromUnixNS, s.LoopToUnixNS)
	if b := s.Burn; b != nil {
		b.validate(v, p+".burn")
	}
	for i, m := range s.Memory {
		q := fmt.Sprintf("%s.memory[%d]", p, i)
		atLeast(v, q+".elapsed_s", m.ElapsedSeconds, 0)
		atLeast(v, q+".iteration", float64(m.Iteration), 0)
		atLeast(v, q+".host_rss_bytes", float64(m.HostRSSBytes), 0)
		atLeast(v, q+".device_used_bytes", float64(m.DeviceUsedBytes), 0)
	}
}

// validateLoopWindow reports a loop window that ends before it starts.
func validateLoopWindow(v *problem.List, p string, from, to int64) {
	atLeast(v, p+".loop_from_unix_ns", float64(from), 0)
	if to != 0 && to < from {
		v.Add(p+".loop_to_unix_ns", "", "%d: expected a time at or after loop_from_unix_ns (%d)", to, from)
	}
}

func (b *BurnThroughput) validate(v *problem.List, p string) {
	oneOf(v, p+".kernel", b.Kernel, "hmma", "ffma")
	atLeast(v, p+".launches", float64(b.Launches), 0)
	atLeast(v, p+".flops", b.Flops, 0)
	atLeast(v, p+".busy_s", b.BusySeconds, 0)
	atLeast(v, p+".tflops", b.TFLOPS, 0)
	atLeast(v, p+".window_s", b.WindowSeconds, 0)
	for i, w := range b.Windows {
		q := fmt.Sprintf("%s.windows[%d]", p, i)
		atLeast(v, q+".from_s", w.FromSeconds, 0)
		atLeast(v, q+".flops", w.Flops, 0)
		atLeast(v, q+".busy_s", w.BusySeconds, 0)
		if w.ToSeconds < w.FromSeconds {
			v.Add(q+".to_s", "", "%v: expected a time at or after from_s (%v)", w.ToSeconds, w.FromSeconds)
		}
	}
}

// oneOf reports a value that is none of want.
func oneOf(v *problem.List, path, got string, want ...string) {
	if slices.Contains(want, got) {
		return
	}
	v.Add(path, "", "%q: expected %s", got, orList(want))
}

// orList spells want as "a, b or c".
func orList(want []string) string {
	if len(want) == 1 {
		return want[0]
	}
	return strings.Join(want[:len(want)-1], ", ") + " or " + want[len(want)-1]
}

func nonEmpty(v *problem.List, path, got string) {
	if got == "" {
		v.Add(path, "", "empty: expected at least one character")
	}
}

func atLeast(v *problem.List, path string, got, lo float64) {
	if got < lo || math.IsNaN(got) {
		v.Add(path, "", "%v: expected a number >= %v", got, lo)
	}
}
