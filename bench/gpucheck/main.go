// Command gpucheck prints the one table of make gpu-check from a run
// directory of .ci/gpu-check/gpu-check.yaml: the device record, kernel
// verdicts, benchmark medians against the roofline peaks, the burn-in's
// duty cycle and temperatures, the Xid/ECC/remap verdicts of every GPU
// step, and the attestation's verification. A simulated run says so on
// every section.
//
//	go run ./bench/gpucheck [-verify "exit 0: verified"] RUNDIR
//	go run ./bench/gpucheck -require-passed kernels,harness RUNDIR
package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command with its arguments and output; it returns the exit
// code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpucheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verify := fs.String("verify", "", "the attestation verification's outcome, one entry per line")
	passed := fs.String("require-passed", "", "only check that these steps (comma-separated) passed, print nothing")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: gpucheck [-verify TEXT] [-require-passed IDS] RUNDIR")
		return 2
	}
	r, err := rundir.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "gpucheck:", err)
		return 1
	}
	if *passed != "" {
		for _, id := range strings.Split(*passed, ",") {
			if st := r.Step(id); st == nil || st.State != "passed" {
				fmt.Fprintf(stderr, "gpucheck: step %s did not pass\n", id)
				return 1
			}
		}
		return 0
	}
	t := &table{w: tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)}
	if r.Hardware != nil && r.Hardware.Simulated {
		t.sim = " [SIMULATED]"
		fmt.Fprintln(stdout, "SIMULATED: GPUATTEST_FAKE_GPU (go-nvml's mock servers) and a fake CUDA driver or the CPU backend; nothing here ran on or says anything about a GPU")
	}
	fmt.Fprintf(t.w, "SECTION\tITEM\tVALUE\tVERDICT\n")
	t.device(r)
	t.kernels(r)
	t.benchmark(r)
	t.burnin(r)
	t.health(r)
	for _, v := range strings.Split(*verify, "\n") {
		if v = strings.TrimSpace(v); v != "" {
			t.row("attestation", "verify", v, "")
		}
	}
	t.row("run", r.Record.Pipeline.Name, fmt.Sprintf("%d attempt(s)", len(r.Record.Attempts)), string(r.Record.State))
	if err := t.w.Flush(); err != nil {
		return 1
	}
	return 0
}

// byKind returns the run's first step of kind.
func byKind(r *rundir.Run, kind string) *rundir.Step {
	for _, s := range r.Steps {
		if s.Kind == kind {
			return s
		}
	}
	return nil
}

// table writes rows of SECTION, ITEM, VALUE, VERDICT; sim is appended to
// every section of a simulated run.
type table struct {
	w   *tabwriter.Writer
	sim string
}

// maxValue is the widest VALUE a row prints: a longer one goes on as
// many rows as it needs, broken between words, so that one long verdict
// does not widen the whole table.
const maxValue = 100

func (t *table) row(section, item, value, verdict string) {
	for i, v := range wrap(value, maxValue) {
		if i > 0 {
			verdict = ""
		}
		fmt.Fprintf(t.w, "%s%s\t%s\t%s\t%s\n", section, t.sim, item, v, verdict)
	}
}

// wrap breaks s between words into lines of at most width bytes; a word
// longer than width is a line of its own.
func wrap(s string, width int) []string {
	var lines []string
	var line strings.Builder
	for _, w := range strings.Fields(s) {
		if line.Len() > 0 && line.Len()+1+len(w) > width {
			lines = append(lines, line.String())
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	return append(lines, line.String())
}

func (t *table) device(r *rundir.Run) {
	hw := r.Hardware
	if hw == nil {
		t.row("device", "-", "no hardware record", "")
		return
	}
	t.row("device", "driver", fmt.Sprintf("%s (CUDA %s, NVML %s)", dash(hw.DriverVersion), dash(hw.CUDADriverVersion), dash(hw.NVMLVersion)), "")
	if len(hw.GPUs) == 0 {
		t.row("device", "gpus", "none: "+hw.Reason, "")
	}
	for _, g := range hw.GPUs {
		item := "gpu " + strconv.Itoa(g.Index)
		if g.Error != "" {
			t.row("device", item, g.Error, "error")
			continue
		}
		mem := "-"
		if g.MemoryTotalBytes != nil {
			mem = pipeline.FormatSize(*g.MemoryTotalBytes)
		}
		t.row("device", item, fmt.Sprintf("%s, cc %s, %s, %s", g.Name, dash(g.ComputeCapability), mem, g.UUID), "")
	}
}

func (t *table) kernels(r *rundir.Run) {
	st := byKind(r, pipeline.KindTest)
	if st == nil {
		return
	}
	res, err := suite.ReadResults(filepath.Join(r.Dir, "steps", st.ID, "results.json"))
	if err != nil {
		t.row("kernels", "validate", firstLine(st.Reason), string(st.State))
		return
	}
	t.row("kernels", "backend", res.Backend+" "+res.Device, string(st.State))
	if len(res.Devices) > 0 {
		t.perGPU("kernels", res)
		return
	}
	for _, c := range res.Cases {
		if c.Kernel == "memsweep" {
			t.row("memory-sweep", "device", sweepText(c), c.Status)
			continue
		}
		v := ""
		if c.Correctness != nil {
			v = fmt.Sprintf("max abs error %.3g (tolerance %.3g)", c.Correctness.MaxAbsError, c.Correctness.Tolerance)
		}
		if c.Message != "" {
			v = c.Message
		}
		t.row("kernels", c.Name, v, c.Status)
	}
}

// perGPU prints a run over several devices: one row per GPU (its cases
// passed, by UUID), a row per case that did not pass, and the cross-GPU
// comparison of outputs.
func (t *table) perGPU(section string, res *suite.Results) {
	for _, d := range res.Devices {
		v := fmt.Sprintf("%s %s: %d of %d cases passed", d.Name, d.UUID, d.Passed, d.Cases)
		if d.Error != "" {
			v += "; " + d.Error
		}
		verdict := "passed"
		if d.Passed != d.Cases || d.Error != "" {
			verdict = "failed"
		}
		t.row(section, fmt.Sprintf("gpu %d", d.Ordinal), v, verdict)
	}
	for _, c := range res.Cases {
		if c.Kernel == "memsweep" {
			t.row("memory-sweep", "gpu "+c.Config["device_ordinal"], c.Config["device_uuid"]+": "+sweepText(c), c.Status)
		} else if c.Status != suite.StatusPassed {
			t.row(section, c.Name, c.Message, c.Status)
		}
	}
	if x := res.CrossDevice; x != nil {
		v := fmt.Sprintf("%d cases compared across %d GPUs of one model: %d disagreement(s)", x.CasesCompared, x.Devices, len(x.Disagreements))
		verdict := "passed"
		if len(x.Disagreements) > 0 {
			verdict = "failed"
			v += ": " + strings.Join(x.Disagreements, "; ")
		}
		t.row(section, "cross-GPU outputs", v, verdict)
	}
}

func (t *table) benchmark(r *rundir.Run) {
	st := byKind(r, pipeline.KindBenchmark)
	if st == nil || st.Benchmark == nil {
		if st != nil {
			t.row("benchmark", "-", firstLine(st.Reason), string(st.State))
		}
		return
	}
	for _, c := range st.Benchmark.Cases {
		if c.Stats == nil {
			t.row("benchmark", c.Name, "no samples", "")
			continue
		}
		v := fmt.Sprintf("median %.1f us, %.1f GFLOP/s, %.1f GB/s", c.Stats.Median/1e3, c.GFLOPS, c.GBPS)
		if g := c.Config["grid"]; g != "" {
			v += fmt.Sprintf(", grid %s on %s SMs", g, dash(c.Config["sm_count"]))
		}
		if w := c.Config["warmup_stop"]; w != "" {
			v += fmt.Sprintf(", warm-up %s ms (%s)", c.Config["warmup_ms"], w)
		}
		if c.Config["graph"] == "true" {
			v += ", CUDA graph"
		}
		if k := c.Clocks; k != nil {
			v += "; " + clocksText(k)
		}
		roof := ""
		if rf := c.Roofline; rf != nil {
			switch {
			case rf.Attained != nil:
				roof = fmt.Sprintf("%.1f %% of the %s roof (%s; peak %.0f GFLOP/s, %.0f GB/s)", 100**rf.Attained, rf.Bound, rf.Model, rf.PeakFLOPS/1e9, rf.PeakBytesPerS/1e9)
			default:
				roof = rf.Note
			}
		}
		t.row("benchmark", c.Name, v, roof)
	}
	t.floors("benchmark", st.Benchmark.Floors)
}

// floors prints each floor a step applied: the GPU's model, the floor
// against its peak and what the GPU reached, or why it was not judged.
func (t *table) floors(section string, fs []attest.AppliedFloor) {
	for _, f := range fs {
		var parts []string
		if f.Model != "" {
			parts = append(parts, fmt.Sprintf("%s floor %s of peak %s", f.Model, floorValue(f.Metric, f.Min), floorValue(f.Metric, f.Peak)))
		}
		if f.Measured != nil {
			parts = append(parts, "reached "+floorValue(f.Metric, *f.Measured))
		}
		v := f.GPU + ": " + strings.Join(parts, ", ")
		if f.Note != "" {
			v += " (" + f.Note + ")"
		}
		t.row(section, "floor "+f.Metric, v, f.Verdict)
	}
}

// floorValue formats a floor's value in its metric's unit.
func floorValue(metric string, v float64) string {
	switch metric {
	case "memory_bandwidth":
		return fmt.Sprintf("%.0f GB/s", v/1e9)
	case "tensor_fp16":
		return fmt.Sprintf("%.4g TFLOP/s", v/1e12)
	case "power_share":
		return fmt.Sprintf("%.0f %% of the limit", 100*v)
	}
	return fmt.Sprint(v)
}

func (t *table) burnin(r *rundir.Run) {
	st := byKind(r, pipeline.KindBurnin)
	if st == nil {
		return
	}
	d := st.Burnin
	if d == nil {
		t.row("burn-in", "-", firstLine(st.Reason), string(st.State))
		return
	}
	duty := "-"
	if d.DutyCycle != nil {
		duty = fmt.Sprintf("%.1f %% (%s)", 100**d.DutyCycle, d.Timing)
		if d.MinDutyCycle != nil {
			duty += fmt.Sprintf(", required >= %.0f %%", 100**d.MinDutyCycle)
		}
	}
	t.row("burn-in", "duration", fmt.Sprintf("%s of %s, %d rounds, %d repeats compared", d.Elapsed, d.Requested, d.Iterations, d.RepeatsChecked), string(st.State))
	t.row("burn-in", "duty cycle", duty, "")
	temps := "-"
	if d.TempMinC != nil && d.TempMaxC != nil {
		temps = fmt.Sprintf("%.0f-%.0f C", *d.TempMinC, *d.TempMaxC)
	}
	thr := "-"
	if d.ThrottleShare != nil {
		thr = fmt.Sprintf("%.1f %% of samples", 100**d.ThrottleShare)
	}
	t.row("burn-in", "temperature", temps, "")
	t.row("burn-in", "throttled", thr, "")
	if len(d.Mismatches) > 0 {
		t.row("burn-in", "mismatches", strings.Join(d.Mismatches, "; "), "failed")
	}
	for _, g := range d.GPUs {
		t.burninGPU(g)
	}
	t.floors("burn-in", d.Floors)
	// The burn-in keeps its last run's harness results as results-last.json.
	if res, err := suite.ReadResults(filepath.Join(r.Dir, "steps", st.ID, "results-last.json")); err == nil {
		if v := kernelCode(res); v != "" {
			t.row("burn-in", "kernel code", v, "")
		}
	}
}

// kernelCode says what the harness loaded for its own kernels (the burn
// case's "code": "cubin sm_90", or "ptx (JIT)" on a GPU with no shipped
// cubin), with how many GPUs loaded each; "" when no case says.
func kernelCode(res *suite.Results) string {
	count := map[string]int{}
	for _, c := range res.Cases {
		if c.Kernel == "burn" && c.Config["code"] != "" {
			count[c.Config["code"]]++
		}
	}
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%s on %d GPU(s)", code, count[code]))
	}
	return strings.Join(parts, ", ")
}

// burninGPU is one GPU's burn-in row: its loop, temperature and power
// against its limit.
func (t *table) burninGPU(g suite.BurninGPU) {
	item := "gpu " + g.UUID
	if g.Index != nil {
		item = fmt.Sprintf("gpu %d", *g.Index)
	}
	var parts []string
	if g.DutyCycle != nil {
		parts = append(parts, fmt.Sprintf("duty %.1f %%, %d repeats compared, %d differ", 100**g.DutyCycle, g.RepeatsChecked, g.Mismatches))
	}
	if g.TempMinC != nil && g.TempMaxC != nil {
		parts = append(parts, fmt.Sprintf("%.0f-%.0f C", *g.TempMinC, *g.TempMaxC))
	}
	if g.PowerMaxWatts != nil {
		p := fmt.Sprintf("peak %.0f W", *g.PowerMaxWatts)
		if g.PowerMedianWatts != nil {
			p = fmt.Sprintf("median %.0f W over the loop, %s", *g.PowerMedianWatts, p)
		}
		if g.PowerLimitWatts != nil && *g.PowerLimitWatts > 0 {
			ref, label := *g.PowerMaxWatts, ""
			if g.PowerMedianWatts != nil {
				ref, label = *g.PowerMedianWatts, "median "
			}
			p += fmt.Sprintf(" of %.0f W limit (%s%.0f %%)", *g.PowerLimitWatts, label, 100*ref / *g.PowerLimitWatts)
		}
		parts = append(parts, p)
	}
	if g.BurnTFLOPS != nil {
		b := fmt.Sprintf("burn %s %.4g TFLOP/s", g.BurnKernel, *g.BurnTFLOPS)
		if g.BurnNodeMedianTFLOPS != nil && *g.BurnNodeMedianTFLOPS > 0 {
			b += fmt.Sprintf(" (%.0f %% of the node's median)", 100**g.BurnTFLOPS / *g.BurnNodeMedianTFLOPS)
		}
		if g.BurnFirstTFLOPS != nil && g.BurnLastTFLOPS != nil {
			b += fmt.Sprintf(", first window %.4g, last %.4g", *g.BurnFirstTFLOPS, *g.BurnLastTFLOPS)
		}
		parts = append(parts, b)
	}
	if g.PowerCappedShare != nil {
		parts = append(parts, fmt.Sprintf("power-capped %.0f %% of samples", 100**g.PowerCappedShare))
	}
	if g.ThrottleShare != nil {
		parts = append(parts, fmt.Sprintf("slowed %.0f %%", 100**g.ThrottleShare))
	}
	if g.Utilization != nil {
		parts = append(parts, fmt.Sprintf("NVML utilization %.0f %% (median of %d)", 100**g.Utilization, g.UtilizationSamples))
	}
	if m := g.DeviceMemory; m != nil && m.SlopePerIteration != nil {
		parts = append(parts, fmt.Sprintf("device memory %+.0f B/sample (NVML)", *m.SlopePerIteration))
	}
	if g.Error != "" {
		parts = append(parts, g.Error)
	}
	verdict := ""
	switch {
	case g.Error != "" || g.Mismatches > 0 || (g.Loaded != nil && !*g.Loaded):
		verdict = "failed"
	case g.Loaded != nil:
		verdict = "loaded"
	}
	t.row("burn-in", item, g.UUID+": "+strings.Join(parts, ", "), verdict)
}

// health prints each GPU step's preflight and telemetry verdicts: Xid
// events, double-bit ECC counts, row remapping.
func (t *table) health(r *rundir.Run) {
	for _, st := range r.Steps {
		if st.Telemetry == nil && st.Preflight == nil {
			continue
		}
		if p := st.Preflight; p != nil {
			failed := 0
			for _, c := range p.Checks {
				if c.Status == gpu.CheckFailed {
					failed++
					t.row("health", st.ID+" preflight", c.Message, "failed")
				}
			}
			if failed == 0 {
				t.row("health", st.ID+" preflight", fmt.Sprintf("%d checks on GPUs %v", len(p.Checks), p.GPUs), "passed")
			}
		}
		if s := st.Telemetry; s != nil {
			t.telemetry(st.ID, s)
		}
	}
}

func (t *table) telemetry(id string, s *gpu.Summary) {
	xids := "none"
	if len(s.XidEvents) > 0 {
		var x []string
		for _, e := range s.XidEvents {
			x = append(x, fmt.Sprintf("gpu %d Xid %d", e.GPU, e.Xid))
		}
		xids = strings.Join(x, ", ")
	}
	t.row("health", id+" Xid", xids, "")
	for _, h := range s.GPUs {
		t.row("health", fmt.Sprintf("%s gpu %d ECC/remap", id, h.Index), fmt.Sprintf("double-bit %s -> %s, corrected %s -> %s, uncorrectable remapped rows %s -> %s, remap pending %s, failed %s",
			u64(h.DoubleBitBefore), u64(h.DoubleBitAfter), u64(h.CorrectedBefore), u64(h.CorrectedAfter), intp(h.RemappedRowsBefore), intp(h.RemappedRowsAfter), boolp(h.RemapPendingAfter), boolp(h.RemapFailedAfter)), "")
		if v := linksText(h); v != "" {
			t.row("health", fmt.Sprintf("%s gpu %d links/thermal", id, h.Index), v, "")
		}
	}
	tel := fmt.Sprintf("%d samples of GPUs %v", s.Samples, s.JudgedGPUs)
	if len(s.Verdict.Reasons) > 0 {
		tel += "; " + strings.Join(s.Verdict.Reasons, "; ")
	}
	for _, n := range s.Notes {
		tel += "; note: " + n
	}
	t.row("health", id+" telemetry", tel, string(s.Verdict.Status))
}

// clocksText is a case's SM and memory clocks and clock-event reasons
// around its samples.
func clocksText(k *suite.CaseClocks) string {
	span := func(lo, hi *uint32) string {
		if lo == nil || hi == nil {
			return "-"
		}
		if *lo == *hi {
			return strconv.FormatUint(uint64(*lo), 10)
		}
		return fmt.Sprintf("%d-%d", *lo, *hi)
	}
	var rs []string
	for r, n := range k.Reasons {
		rs = append(rs, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(rs)
	return fmt.Sprintf("SM %s MHz, memory %s MHz over %d samples, reasons: %s", span(k.SMMinMHz, k.SMMaxMHz), span(k.MemMinMHz, k.MemMaxMHz), k.Samples, dash(strings.Join(rs, ", ")))
}

// linksText is one GPU's PCIe link (seen of supported), NVLinks (active
// before -> after, error totals' rise) and hottest core and HBM
// temperature against its thresholds.
func linksText(h gpu.Health) string {
	var parts []string
	if p := h.PCIe; p != nil {
		parts = append(parts, fmt.Sprintf("PCIe Gen%s x%s seen of Gen%s x%s", intp(p.GenSeen), intp(p.WidthSeen), intp(p.MaxGen), intp(p.MaxWidth)))
	}
	if n := h.NVLink; n != nil {
		parts = append(parts, fmt.Sprintf("NVLink %d -> %d active, CRC %s -> %s, replay %s -> %s, recovery %s -> %s", len(n.ActiveBefore), len(n.ActiveAfter),
			u64(n.CRCBefore), u64(n.CRCAfter), u64(n.ReplayBefore), u64(n.ReplayAfter), u64(n.RecoveryBefore), u64(n.RecoveryAfter)))
	}
	if th := h.Thermal; th != nil {
		parts = append(parts, fmt.Sprintf("core max %s C (slowdown %s C), HBM max %s C (limit %s C)", u32(th.GPUMaxC), u32(th.SlowdownC), u32(th.MemMaxC), u32(th.MemLimitC)))
	}
	return strings.Join(parts, "; ")
}

func u32(p *uint32) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatUint(uint64(*p), 10)
}

// sweepText says how much memory a sweep covered: of the free memory
// when the device reported it.
func sweepText(c suite.Case) string {
	covered, _ := strconv.ParseFloat(c.Config["bytes_covered"], 64)
	v := pipeline.FormatSize(uint64(covered)) + " swept"
	if free, err := strconv.ParseFloat(c.Config["free_bytes"], 64); err == nil && free > 0 {
		v += fmt.Sprintf(" of %s free (%.1f %%)", pipeline.FormatSize(uint64(free)), 100*covered/free)
	}
	if c.Config["scaled_down"] == "true" {
		v += ", scaled down (cpu backend)"
	}
	v += ", " + c.Config["passes"] + " passes"
	if c.Message != "" {
		v += ": " + c.Message
	}
	return v
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

func u64(p *uint64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatUint(*p, 10)
}

func intp(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

func boolp(p *bool) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatBool(*p)
}
