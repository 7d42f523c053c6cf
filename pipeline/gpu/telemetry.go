package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// DefaultInterval is the telemetry sampling interval when none is given.
const DefaultInterval = time.Second

// MinInterval is the shortest sampling interval StartTelemetry accepts.
const MinInterval = time.Millisecond

// eventWait is how long the event goroutine blocks in one NVML wait; it
// bounds how long Stop takes.
const eventWait = 200 * time.Millisecond

// SlowdownCounter is one of NVML's cumulative clock-event counters of a
// GPU before and after a step, in nanoseconds; nil when not reported.
type SlowdownCounter struct {
	// Reason names the clock-event reason (sw_power_cap, ...).
	Reason string `json:"reason"`
	// BeforeNS and AfterNS are the counter at start and at stop.
	BeforeNS *uint64 `json:"before_ns,omitempty"`
	AfterNS  *uint64 `json:"after_ns,omitempty"`
}

// rise is how much the counter grew during the step; false when either
// reading is missing.
func (c SlowdownCounter) rise() (uint64, bool) {
	if c.BeforeNS == nil || c.AfterNS == nil || *c.AfterNS < *c.BeforeNS {
		return 0, false
	}
	return *c.AfterNS - *c.BeforeNS, true
}

// clockReasonNames names the bits of NVML's clock-event (throttle)
// reasons mask. The values are nvml.h's, written out so that the package
// builds without go-nvml (no cgo, not Linux); TestNVMLConstants checks
// them against go-nvml where it builds.
var clockReasonNames = []struct {
	bit  uint64
	name string
}{
	{0x1 /* ClocksEventReasonGpuIdle */, "gpu_idle"},
	{0x2 /* ClocksEventReasonApplicationsClocksSetting */, "applications_clocks_setting"},
	{0x4 /* ClocksEventReasonSwPowerCap */, "sw_power_cap"},
	{0x8 /* ClocksThrottleReasonHwSlowdown */, "hw_slowdown"},
	{0x10 /* ClocksEventReasonSyncBoost */, "sync_boost"},
	{0x20 /* ClocksEventReasonSwThermalSlowdown */, "sw_thermal_slowdown"},
	{0x40 /* ClocksThrottleReasonHwThermalSlowdown */, "hw_thermal_slowdown"},
	{0x80 /* ClocksThrottleReasonHwPowerBrakeSlowdown */, "hw_power_brake_slowdown"},
	{0x100 /* ClocksEventReasonDisplayClockSetting */, "display_clock_setting"},
}

// ThrottleMask are the clock-event reasons that count a sample as
// throttled, each a fault on a loaded GPU: HW slowdown, SW and HW thermal
// slowdown and the HW power brake. The software power cap
// (sw_power_cap) is not among them: a GPU loaded to its power limit shows
// it in nearly every sample, as it should (see PowerCapped). Idle,
// application clocks, sync boost and display settings do not count
// either.
const ThrottleMask uint64 = 0x8 /* ClocksThrottleReasonHwSlowdown */ |
	0x20 /* ClocksEventReasonSwThermalSlowdown */ | 0x40 /* ClocksThrottleReasonHwThermalSlowdown */ |
	0x80 /* ClocksThrottleReasonHwPowerBrakeSlowdown */

// slowdownCounters are NVML's cumulative clock-event counters (field
// values, nanoseconds since the driver loaded) that telemetry reads
// before and after a step. A rise of a fault reason fails the step; the
// power cap's is reported. HW slowdown has no counter: its samples judge
// it.
var slowdownCounters = []struct {
	field uint32
	bit   uint64
	name  string
	fault bool
}{
	{74 /* FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP */, 0x4 /* ClocksEventReasonSwPowerCap */, "sw_power_cap", false},
	{269 /* FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN */, 0x20 /* ClocksEventReasonSwThermalSlowdown */, "sw_thermal_slowdown", true},
	{270 /* FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN */, 0x40 /* ClocksThrottleReasonHwThermalSlowdown */, "hw_thermal_slowdown", true},
	{271 /* FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN */, 0x80 /* ClocksThrottleReasonHwPowerBrakeSlowdown */, "hw_power_brake_slowdown", true},
}

// ClockEventReasons names the bits set in mask.
func ClockEventReasons(mask uint64) []string {
	var out []string
	for _, r := range clockReasonNames {
		if mask&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	return out
}

// Summary is what telemetry saw around one step.
type Summary struct {
	// Simulated is true when the GPUs were simulated.
	Simulated bool `json:"simulated"`
	// IntervalSeconds is the sampling interval.
	IntervalSeconds float64 `json:"interval_s"`
	// DurationSeconds is the time from start to stop.
	DurationSeconds float64 `json:"duration_s"`
	// Samples is the number of per-GPU samples taken.
	Samples int `json:"samples"`
	// TemperatureMinC and TemperatureMaxC span all GPUs and samples.
	TemperatureMinC *uint32 `json:"temperature_min_c,omitempty"`
	// TemperatureMaxC is the highest temperature seen.
	TemperatureMaxC *uint32 `json:"temperature_max_c,omitempty"`
	// PowerMaxWatts is the highest power draw seen.
	PowerMaxWatts *float64 `json:"power_max_w,omitempty"`
	// ThrottledSamples counts samples with a reason in ThrottleMask.
	ThrottledSamples int `json:"throttled_samples"`
	// ThrottleShare is ThrottledSamples / Samples (0 with no samples).
	ThrottleShare float64 `json:"throttle_share"`
	// ThrottleReasons counts samples per throttling reason.
	ThrottleReasons map[string]int `json:"throttle_reasons,omitempty"`
	// PowerCappedSamples counts samples at the software power cap
	// (expected under load; not a throttle).
	PowerCappedSamples int `json:"power_capped_samples,omitempty"`
	// MemoryUsedMaxBytes is the most device memory used on any GPU.
	MemoryUsedMaxBytes *uint64 `json:"memory_used_max_bytes,omitempty"`
	// GPUs are the watched GPUs' health counters before and after.
	GPUs []Health `json:"gpus"`
	// XidEvents are the Xid events received, in order.
	XidEvents []XidEvent `json:"xid_events,omitempty"`
	// JudgedGPUs are the NVML indices of the GPUs the statistics and the
	// verdict cover: the step's device when the results name a watched
	// one, else every watched GPU.
	JudgedGPUs []int `json:"judged_gpus"`
	// DeviceUUID is the GPU the step's results say it ran on, when they
	// name one.
	DeviceUUID string `json:"device_uuid,omitempty"`
	// EventsLost says, when waiting for Xid/ECC events answered
	// GPU_IS_LOST or RESET_REQUIRED, what it answered.
	EventsLost string `json:"events_lost,omitempty"`
	// Notes say what could not be watched (events not supported, ...).
	Notes []string `json:"notes,omitempty"`
	// CorrectedErrorsFail is true when corrected ECC errors and rows
	// remapped for correctable errors during the step fail it (test and
	// burn-in steps: the memory sweep and the burn's stream are there to
	// find them); else they are noted.
	CorrectedErrorsFail bool `json:"corrected_errors_fail,omitempty"`
	// CallTimeoutSeconds bounds every NVML call telemetry makes for a GPU
	// (a round of them: a sample, the counters at start or stop).
	CallTimeoutSeconds float64 `json:"call_timeout_s,omitempty"`
	// Verdict is failed on a new double-bit ECC error, a row-remap failure,
	// a fatal Xid or a GPU NVML reports lost or needing a reset.
	Verdict Verdict `json:"verdict"`
}

// Health is one GPU's error counters before and after the step. A nil
// counter was not reported.
type Health struct {
	// Index is the device index.
	Index int `json:"index"`
	// UUID identifies the device.
	UUID string `json:"uuid,omitempty"`
	// PCIBusID is the device's PCI bus id (to match kernel-log Xids).
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// CorrectedBefore and CorrectedAfter are the volatile corrected
	// (single-bit) ECC counts at start and stop; a rise is noted.
	CorrectedBefore *uint64 `json:"ecc_corrected_before,omitempty"`
	CorrectedAfter  *uint64 `json:"ecc_corrected_after,omitempty"`
	// PCIe is the PCIe link supported against the link seen.
	PCIe *PCIeLink `json:"pcie,omitempty"`
	// NVLink is the NVLinks' state and error totals before and after;
	// nil without NVLink.
	NVLink *NVLinks `json:"nvlink,omitempty"`
	// Thermal is the hottest core and HBM temperature against the GPU's
	// thresholds.
	Thermal *Thermal `json:"thermal,omitempty"`
	// DoubleBitBefore is the volatile uncorrected (double-bit) ECC count
	// at start.
	DoubleBitBefore *uint64 `json:"ecc_double_bit_before,omitempty"`
	// DoubleBitAfter is the same count at stop.
	DoubleBitAfter *uint64 `json:"ecc_double_bit_after,omitempty"`
	// DoubleBitEvents counts double-bit ECC events received.
	DoubleBitEvents int `json:"ecc_double_bit_events,omitempty"`
	// RemappedRowsBefore is the uncorrectable-error remapped row count at
	// start.
	RemappedRowsBefore *int `json:"remapped_rows_uncorrectable_before,omitempty"`
	// RemappedRowsAfter is the same count at stop.
	RemappedRowsAfter *int `json:"remapped_rows_uncorrectable_after,omitempty"`
	// RemappedCorrectableBefore and RemappedCorrectableAfter are the rows
	// remapped for correctable errors at start and stop.
	RemappedCorrectableBefore *int `json:"remapped_rows_correctable_before,omitempty"`
	RemappedCorrectableAfter  *int `json:"remapped_rows_correctable_after,omitempty"`
	// Hung says, when an NVML call for the GPU did not return within the
	// call timeout, which round of calls it was: the GPU or the driver
	// hangs, and the step fails.
	Hung string `json:"hung,omitempty"`
	// RemapPendingBefore is whether a row remapping waited for a reset at
	// start.
	RemapPendingBefore *bool `json:"remap_pending_before,omitempty"`
	// RemapPendingAfter is the same flag at stop.
	RemapPendingAfter *bool `json:"remap_pending_after,omitempty"`
	// RecoveryActionBefore is the recovery action the driver asked for at
	// start (NVML field GET_GPU_RECOVERY_ACTION), when reported.
	RecoveryActionBefore string `json:"recovery_action_before,omitempty"`
	// RecoveryActionAfter is the same at stop.
	RecoveryActionAfter string `json:"recovery_action_after,omitempty"`
	// RemapFailedBefore is whether a row remapping had failed at start.
	RemapFailedBefore *bool `json:"remap_failed_before,omitempty"`
	// RemapFailedAfter is whether a row remapping had failed at stop.
	RemapFailedAfter *bool `json:"remap_failed_after,omitempty"`
	// RetiredPagesPendingBefore is the pending page-retirement flag at start.
	RetiredPagesPendingBefore *bool `json:"retired_pages_pending_before,omitempty"`
	// RetiredPagesPendingAfter is the same flag at stop.
	RetiredPagesPendingAfter *bool `json:"retired_pages_pending_after,omitempty"`
	// Lost says, when NVML answered GPU_IS_LOST or RESET_REQUIRED for the
	// device during the step, which query first did and what it answered.
	Lost string `json:"lost,omitempty"`
	// Slowdown are NVML's cumulative clock-event counters before and
	// after the step (those the driver reports).
	Slowdown []SlowdownCounter `json:"slowdown,omitempty"`
	// SlowdownSamples counts the samples per slowdown reason in
	// ThrottleMask (HW slowdown has no counter: its samples judge it).
	SlowdownSamples map[string]int `json:"slowdown_samples,omitempty"`
}

// XidEvent is one Xid event.
type XidEvent struct {
	// Time is when it was received.
	Time time.Time `json:"time"`
	// GPU is the device index.
	GPU int `json:"gpu"`
	// Xid is the code.
	Xid uint64 `json:"xid"`
	// Fatal is whether the code fails the step (see FatalXids).
	Fatal bool `json:"fatal"`
	// Description says what the code means.
	Description string `json:"description"`
	// Source is "kernel log" for an Xid read from /dev/kmsg that no NVML
	// event reported; empty for NVML's events.
	Source string `json:"source,omitempty"`
}

// VerdictStatus is passed or failed.
type VerdictStatus string

// The telemetry verdicts.
const (
	VerdictPassed VerdictStatus = "passed"
	VerdictFailed VerdictStatus = "failed"
)

// Verdict is telemetry's judgement of a step.
type Verdict struct {
	// Status is passed or failed.
	Status VerdictStatus `json:"status"`
	// Reasons say why it failed, one line per cause.
	Reasons []string `json:"reasons,omitempty"`
}

// gpuStats are one GPU's sample statistics.
type gpuStats struct {
	samples, throttled int
	powerCapped        int
	tempMin, tempMax   *uint32
	powerMax           *float64
	memMax             *uint64
	memTempMax         *uint32
	genMax, widthMax   *int
	utilMax            *uint32
	reasons            map[string]int
}

// TelemetryOption configures StartTelemetry.
type TelemetryOption func(*telemetryOptions) error

type telemetryOptions struct {
	gpus          []int // NVML indices; nil: every GPU
	failCorrected bool
	callTimeout   time.Duration
}

// DefaultCallTimeout is how long telemetry waits for one round of NVML
// calls for a GPU (a sample, its counters at start or at stop, an event
// wait) before it gives the GPU up as hung and fails the step.
const DefaultCallTimeout = 10 * time.Second

// FailOnCorrectedErrors makes a rise of the corrected ECC count, or of
// the rows remapped for correctable errors, fail the step (as test and
// burn-in steps do: a single-bit fault is what their memory sweeps look
// for, and ECC hides it from their outputs); without it, it is noted.
func FailOnCorrectedErrors() TelemetryOption {
	return func(o *telemetryOptions) error {
		o.failCorrected = true
		return nil
	}
}

// WithCallTimeout bounds each round of NVML calls for one GPU by d
// (DefaultCallTimeout when not given).
func WithCallTimeout(d time.Duration) TelemetryOption {
	return func(o *telemetryOptions) error {
		if d <= 0 {
			return fmt.Errorf("gpu.WithCallTimeout: %v: expected a positive duration", d)
		}
		o.callTimeout = d
		return nil
	}
}

// within runs f on a goroutine of its own and waits at most d for it: a
// hung NVML call must not hang gpuattest. ok is false when f did not
// return in time; it is left running and its result dropped.
func within[T any](d time.Duration, f func() T) (v T, ok bool) {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v = <-ch:
		return v, true
	case <-timer.C:
		return v, false
	}
}

// WatchGPUs watches only the GPUs with these NVML indices (the ones a
// step can see: see hardware.Record.Visible) instead of every GPU;
// another GPU's samples, Xids and counters are not read.
func WatchGPUs(indices ...int) TelemetryOption {
	return func(o *telemetryOptions) error {
		if len(indices) == 0 {
			return errors.New("gpu.WatchGPUs: no GPU")
		}
		o.gpus = append([]int(nil), indices...)
		return nil
	}
}

// health is one reading of a GPU's error counters; a nil counter was not
// reported, and lost is set when a query found the GPU lost.
type health struct {
	dbe          *uint64
	corrected    *uint64
	remapped     *int
	remappedCorr *int
	failed       *bool
	remapPending *bool
	pending      *bool
	recovery     string
	lost         string
}

// add counts sample l.
func (s *gpuStats) add(l runtypes.TelemetryLine) {
	s.samples++
	if v := l.TemperatureC; v != nil {
		if s.tempMin == nil || *v < *s.tempMin {
			s.tempMin = ptr(*v)
		}
		if s.tempMax == nil || *v > *s.tempMax {
			s.tempMax = ptr(*v)
		}
	}
	if v := l.PowerWatts; v != nil && (s.powerMax == nil || *v > *s.powerMax) {
		s.powerMax = ptr(*v)
	}
	if v := l.MemoryUsedBytes; v != nil && (s.memMax == nil || *v > *s.memMax) {
		s.memMax = ptr(*v)
	}
	if l.PowerCapped {
		s.powerCapped++
	}
	if v := l.MemTemperatureC; v != nil && (s.memTempMax == nil || *v > *s.memTempMax) {
		s.memTempMax = ptr(*v)
	}
	if v := l.UtilizationPct; v != nil && (s.utilMax == nil || *v > *s.utilMax) {
		s.utilMax = ptr(*v)
	}
	if v := l.PCIeGen; v != nil && (s.genMax == nil || *v > *s.genMax) {
		s.genMax = ptr(*v)
	}
	if v := l.PCIeWidth; v != nil && (s.widthMax == nil || *v > *s.widthMax) {
		s.widthMax = ptr(*v)
	}
	if l.Throttled {
		s.throttled++
		if s.reasons == nil {
			s.reasons = map[string]int{}
		}
		for _, r := range ClockEventReasons(*l.ClockEventMask & ThrottleMask) {
			s.reasons[r]++
		}
	}
}

// verdict applies the rules: a GPU found lost or needing a reset, a new
// double-bit ECC error, a row-remap failure or a fatal Xid fails the step.
func verdict(s *Summary) Verdict {
	var reasons []string
	if s.EventsLost != "" {
		reasons = append(reasons, s.EventsLost+": "+lostGPUs(s.GPUs))
	}
	judged := map[int]bool{}
	for _, i := range s.JudgedGPUs {
		judged[i] = true
	}
	for _, h := range s.GPUs {
		if !judged[h.Index] {
			if r := healthReasons(h); len(r) > 0 {
				s.Notes = append(s.Notes, fmt.Sprintf("not the step's GPU, not judged: %s", strings.Join(r, "; ")))
			}
			continue
		}
		reasons = append(reasons, healthReasons(h)...)
		reasons = append(reasons, linkReasons(h, mostNVLinks(s.GPUs))...)
		reasons = append(reasons, thermalReasons(h)...)
		notes := healthNotes(h)
		if s.CorrectedErrorsFail {
			c := correctedReasons(h)
			for i := range c {
				c[i] += ": a memory fault the sweep and the burn-in are there to find (ECC corrected it, so no output shows it; hint: nvidia-smi -q -d ECC,ROW_REMAPPER)"
			}
			reasons = append(reasons, c...)
			notes = slices.DeleteFunc(notes, func(n string) bool { return slices.Contains(correctedReasons(h), n) })
		}
		s.Notes = append(s.Notes, notes...)
		if h.RetiredPagesPendingBefore != nil && h.RetiredPagesPendingAfter != nil && !*h.RetiredPagesPendingBefore && *h.RetiredPagesPendingAfter {
			s.Notes = append(s.Notes, fmt.Sprintf("gpu %d: a page retirement became pending during the step", h.Index))
		}
	}
	for _, x := range s.XidEvents {
		switch {
		case !judged[x.GPU] && x.GPU >= 0:
			s.Notes = append(s.Notes, fmt.Sprintf("gpu %d (not the step's GPU, not judged): Xid %d (%s)", x.GPU, x.Xid, x.Description))
		case x.Fatal:
			reasons = append(reasons, fmt.Sprintf("gpu %d: fatal Xid %d (%s)%s", x.GPU, x.Xid, x.Description, fromKernel(x)))
		default:
			s.Notes = append(s.Notes, fmt.Sprintf("gpu %d: Xid %d (%s), not fatal", x.GPU, x.Xid, x.Description))
		}
	}
	if len(reasons) > 0 {
		return Verdict{Status: VerdictFailed, Reasons: reasons}
	}
	return Verdict{Status: VerdictPassed}
}

// uuidText is " (UUID)", or "" when the UUID is unknown.
func uuidText(uuid string) string {
	if uuid == "" {
		return ""
	}
	return " (" + uuid + ")"
}

// lostGPUs names the watched GPUs found lost at stop, by index and UUID,
// after an event wait said a GPU is lost (NVML does not say which).
func lostGPUs(gpus []Health) string {
	var lost []string
	for _, h := range gpus {
		if h.Lost != "" {
			lost = append(lost, fmt.Sprintf("gpu %d%s", h.Index, uuidText(h.UUID)))
		}
	}
	if len(lost) == 0 {
		return "a GPU fell off the bus or needs a reset, and none of the watched GPUs answered so at stop (hint: nvidia-smi shows which; its results are void)"
	}
	return "lost: " + strings.Join(lost, ", ") + " fell off the bus or need a reset (hint: nvidia-smi -q -i UUID; their results are void)"
}

// healthReasons are what fails a step in h: lost, new double-bit ECC
// errors, row-remap failure, and remapReasons.
func healthReasons(h Health) []string {
	var reasons []string
	if h.Hung != "" {
		reasons = append(reasons, fmt.Sprintf("gpu %d%s: NVML stopped answering: %s: the GPU or the driver hangs, so its results are void (hint: nvidia-smi -i %d; dmesg for Xids; reset the GPU or reboot)", h.Index, uuidText(h.UUID), h.Hung, h.Index))
	}
	if h.Lost != "" {
		reasons = append(reasons, fmt.Sprintf("gpu %d%s: lost during the step (%s): it fell off the bus or needs a reset, so its results are void (hint: nvidia-smi -i %d; reset or reboot)", h.Index, uuidText(h.UUID), h.Lost, h.Index))
	}
	switch {
	case h.DoubleBitBefore != nil && h.DoubleBitAfter != nil && *h.DoubleBitAfter > *h.DoubleBitBefore:
		reasons = append(reasons, fmt.Sprintf("gpu %d: %d new double-bit ECC error(s) (volatile uncorrected count %d -> %d)",
			h.Index, *h.DoubleBitAfter-*h.DoubleBitBefore, *h.DoubleBitBefore, *h.DoubleBitAfter))
	case h.DoubleBitEvents > 0:
		reasons = append(reasons, fmt.Sprintf("gpu %d: %d double-bit ECC event(s) received", h.Index, h.DoubleBitEvents))
	}
	if h.RemapFailedAfter != nil && *h.RemapFailedAfter {
		when := "during the step"
		if h.RemapFailedBefore != nil && *h.RemapFailedBefore {
			when = "already before the step"
		}
		reasons = append(reasons, fmt.Sprintf("gpu %d: row-remap failure (%s)", h.Index, when))
	}
	reasons = append(reasons, remapReasons(h)...)
	reasons = append(reasons, slowdownReasons(h)...)
	return reasons
}

// slowdownReasons fail a GPU whose clocks a fault slowed during the step:
// a rise of NVML's cumulative SW thermal, HW thermal or HW power-brake
// counter (which catches a slowdown between two samples), or a sample
// with a reason in ThrottleMask (HW slowdown has no counter). The
// software power cap is expected under load and never fails.
func slowdownReasons(h Health) []string {
	var out []string
	const hint = "the clocks were cut by a fault, not by the power limit (hint: check cooling and power delivery; nvidia-smi -q -d PERFORMANCE)"
	rose := map[string]bool{}
	for _, c := range h.Slowdown {
		rise, ok := c.rise()
		for _, sc := range slowdownCounters {
			if ok && sc.name == c.Reason && sc.fault && rise > 0 {
				rose[c.Reason] = true
				out = append(out, fmt.Sprintf("gpu %d: %s for %.3f s during the step (NVML's cumulative counter %d -> %d ns): %s",
					h.Index, c.Reason, float64(rise)/1e9, *c.BeforeNS, *c.AfterNS, hint))
			}
		}
	}
	for _, r := range ClockEventReasons(ThrottleMask) {
		if n := h.SlowdownSamples[r]; n > 0 && !rose[r] {
			out = append(out, fmt.Sprintf("gpu %d: %s in %d sample(s): %s", h.Index, r, n, hint))
		}
	}
	return out
}

// remapReasons judges h's row remapping and recovery action: uncorrectable
// remapped rows that rose during the step, a remapping pending at stop
// and a recovery action other than none at stop each fail it.
func remapReasons(h Health) []string {
	var out []string
	if b, a := h.RemappedRowsBefore, h.RemappedRowsAfter; b != nil && a != nil && *a > *b {
		out = append(out, fmt.Sprintf("gpu %d: %d row(s) remapped for uncorrectable memory errors during the step (%d -> %d)", h.Index, *a-*b, *b, *a))
	}
	if h.RemapPendingAfter != nil && *h.RemapPendingAfter {
		when := "during the step"
		if h.RemapPendingBefore != nil && *h.RemapPendingBefore {
			when = "already before the step"
		}
		out = append(out, fmt.Sprintf("gpu %d: row remapping pending (%s): a faulty memory row is in use until the GPU is reset", h.Index, when))
	}
	if a := h.RecoveryActionAfter; a != "" && a != "none" {
		out = append(out, fmt.Sprintf("gpu %d: the driver asks for recovery action %s", h.Index, a))
	}
	return out
}

// Err returns an error listing the verdict's reasons when it failed.
func (v Verdict) Err() error {
	if v.Status != VerdictFailed {
		return nil
	}
	msg := "telemetry verdict failed:"
	for _, r := range v.Reasons {
		msg += "\n  " + r
	}
	return errors.New(msg)
}
