package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DefaultInterval is the telemetry sampling interval when none is given.
const DefaultInterval = time.Second

// MinInterval is the shortest sampling interval StartTelemetry accepts.
const MinInterval = time.Millisecond

// eventWait is how long the event goroutine blocks in one NVML wait; it
// bounds how long Stop takes.
const eventWait = 200 * time.Millisecond

// clockReasonNames names the bits of NVML's clock-event (throttle)
// reasons mask.
var clockReasonNames = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksEventReasonGpuIdle, "gpu_idle"},
	{nvml.ClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
	{nvml.ClocksEventReasonSwPowerCap, "sw_power_cap"},
	{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"},
	{nvml.ClocksEventReasonSyncBoost, "sync_boost"},
	{nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
	{nvml.ClocksEventReasonDisplayClockSetting, "display_clock_setting"},
}

// ThrottleMask are the clock-event reasons that count a sample as
// throttled, each a fault on a loaded GPU: HW slowdown, SW and HW thermal
// slowdown and the HW power brake. The software power cap
// (sw_power_cap) is not among them: a GPU loaded to its power limit shows
// it in nearly every sample, as it should (see PowerCapped). Idle,
// application clocks, sync boost and display settings do not count
// either.
const ThrottleMask uint64 = nvml.ClocksThrottleReasonHwSlowdown |
	nvml.ClocksEventReasonSwThermalSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown |
	nvml.ClocksThrottleReasonHwPowerBrakeSlowdown

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
	{nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP, nvml.ClocksEventReasonSwPowerCap, "sw_power_cap", false},
	{nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN, nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown", true},
	{nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN, nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown", true},
	{nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN, nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown", true},
}

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

// readSlowdown reads d's cumulative clock-event counters.
func readSlowdown(d nvml.Device) map[string]*uint64 {
	out := map[string]*uint64{}
	for _, c := range slowdownCounters {
		if v, ret := fieldUint(d, c.field); ret == nvml.SUCCESS {
			out[c.name] = ptr(v)
		}
	}
	return out
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

// Line is one line of telemetry.jsonl: a sample of one GPU (Kind
// "sample") or an event NVML delivered (Kind "xid" or "ecc_dbe").
type Line struct {
	// Time is when the sample was taken or the event received.
	Time time.Time `json:"time"`
	// Kind is "sample", "xid" or "ecc_dbe".
	Kind string `json:"kind"`
	// GPU is the device index.
	GPU int `json:"gpu"`
	// TemperatureC is the GPU core temperature.
	TemperatureC *uint32 `json:"temperature_c,omitempty"`
	// PowerWatts is the board power draw.
	PowerWatts *float64 `json:"power_watts,omitempty"`
	// SMClockMHz is the current SM clock.
	SMClockMHz *uint32 `json:"sm_clock_mhz,omitempty"`
	// MemClockMHz is the current memory clock.
	MemClockMHz *uint32 `json:"mem_clock_mhz,omitempty"`
	// ClockEventMask is NVML's clock-event (throttle) reasons mask.
	ClockEventMask *uint64 `json:"clock_event_mask,omitempty"`
	// ClockEventReasons names the bits of ClockEventMask.
	ClockEventReasons []string `json:"clock_event_reasons,omitempty"`
	// Throttled is whether a reason in ThrottleMask (a slowdown, not the
	// power cap) is set.
	Throttled bool `json:"throttled,omitempty"`
	// PowerCapped is whether the software power cap holds the clocks: the
	// expected state of a GPU loaded to its power limit.
	PowerCapped bool `json:"power_capped,omitempty"`
	// MemoryUsedBytes is the used device memory.
	MemoryUsedBytes *uint64 `json:"memory_used_bytes,omitempty"`
	// MemTemperatureC is the HBM temperature (NVML field MEMORY_TEMP).
	MemTemperatureC *uint32 `json:"mem_temperature_c,omitempty"`
	// UtilizationPct is NVML's GPU utilization: the share of the last
	// sample period in which a kernel ran.
	UtilizationPct *uint32 `json:"utilization_gpu_pct,omitempty"`
	// PCIeGen and PCIeWidth are the PCIe link's current generation and
	// width.
	PCIeGen   *int `json:"pcie_gen,omitempty"`
	PCIeWidth *int `json:"pcie_width,omitempty"`
	// Xid is the Xid code of an "xid" line.
	Xid *uint64 `json:"xid,omitempty"`
	// Simulated is true for lines from simulated GPUs.
	Simulated bool `json:"simulated,omitempty"`
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

// Telemetry samples GPUs in the background until Stop.
type Telemetry struct {
	simulated bool
	// legacyReasons is set when the driver predates
	// nvmlDeviceGetCurrentClocksEventReasons (R535): the older throttle
	// reasons call answers the same mask.
	legacyReasons bool
	// memV2 is set when the library has nvmlDeviceGetMemoryInfo_v2, whose
	// Used leaves out what the driver reserves.
	memV2    bool
	interval time.Duration
	start    time.Time
	// callTimeout bounds each round of NVML calls for one GPU; hung
	// marks, by position in devs, a GPU that did not answer in time: its
	// calls are not made again (the goroutine that made the hung one is
	// left behind).
	callTimeout time.Duration
	hung        []bool
	lib         nvml.Interface
	release     func()
	devs        []nvml.Device // the watched GPUs; sum.GPUs and stats follow this order
	kmsg        string        // kernel log to read Xids from ("" none)
	kmsgSeq     *uint64       // its last record at start; nil when not read
	set         nvml.EventSet
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	stopOnce    sync.Once
	stopped     *Summary
	stopErr     error

	mu       sync.Mutex
	f        *os.File
	closed   bool // Stop has run: a goroutine left behind writes nothing
	writeErr error
	sum      Summary
	stats    []gpuStats
	index    map[nvml.Device]int // position in devs
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

// StartTelemetry opens src, reads each watched GPU's error counters
// (every GPU unless WatchGPUs says which), registers for Xid and
// double-bit ECC events on them, and samples every interval
// (DefaultInterval when <= 0) into a new JSONL file at path (its
// directory must exist), one line per GPU per sample, each written
// through at once. It samples once right away and once more at Stop.
// Sampling also ends when ctx is done; Stop must still be called. With no
// GPU the error matches ErrNoGPU.
func StartTelemetry(ctx context.Context, src Source, path string, interval time.Duration, opts ...TelemetryOption) (*Telemetry, error) {
	var o telemetryOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	if interval < MinInterval {
		return nil, fmt.Errorf("telemetry interval %v: expected at least %v\nhint: NVML refreshes most readings every few milliseconds; 1s is the default", interval, MinInterval)
	}
	if o.callTimeout == 0 {
		o.callTimeout = DefaultCallTimeout
	}
	type opened struct {
		lib     nvml.Interface
		release func()
		err     error
	}
	op, ok := within(o.callTimeout, func() opened {
		lib, release, err := src.Open()
		return opened{lib, release, err}
	})
	if !ok {
		return nil, fmt.Errorf("opening NVML did not return within %v: the driver or a GPU hangs (hint: nvidia-smi; dmesg for Xids)", o.callTimeout)
	}
	if op.err != nil {
		return nil, op.err
	}
	lib, release := op.lib, op.release
	t := &Telemetry{simulated: src.Simulated(), interval: interval, lib: lib, release: release, index: map[nvml.Device]int{}, callTimeout: o.callTimeout}
	t.sum.Simulated = t.simulated
	t.sum.CorrectedErrorsFail = o.failCorrected
	t.sum.CallTimeoutSeconds = o.callTimeout.Seconds()
	t.legacyReasons = lib.Extensions().LookupSymbol("nvmlDeviceGetCurrentClocksEventReasons") != nil
	t.memV2 = lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	t.sum.IntervalSeconds = interval.Seconds()
	if err := t.openDevices(o.gpus); err != nil {
		release()
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		release()
		return nil, fmt.Errorf("creating telemetry file: %w", err)
	}
	t.f = f
	t.registerEvents()
	t.kmsgStart(src)

	ctx, t.cancel = context.WithCancel(ctx)
	t.start = time.Now()
	t.sample()
	t.wg.Add(1)
	go t.sampleLoop(ctx)
	if t.set != nil {
		t.wg.Add(1)
		go t.eventLoop(ctx)
	}
	return t, nil
}

// openDevices opens the GPUs to watch (NVML indices; nil: every GPU) and
// reads their error counters.
func (t *Telemetry) openDevices(gpus []int) error {
	n, ret := t.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("counting GPUs: %s", retText(ret))
	}
	if gpus == nil {
		for i := range n {
			gpus = append(gpus, i)
		}
	}
	for _, i := range gpus {
		if i < 0 || i >= n {
			return fmt.Errorf("watching GPU %d: NVML lists %d GPU(s)", i, n)
		}
		d, ret := t.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			// Preflight has failed every step that sees it; another
			// step's telemetry goes on without it.
			t.note("gpu %d not watched: opening it: %s", i, retText(ret))
			continue
		}
		t.index[d] = len(t.devs)
		t.devs = append(t.devs, d)
		h, ok := within(t.callTimeout, func() Health { return before(i, d) })
		if !ok {
			h = Health{Index: i, Hung: fmt.Sprintf("reading its identity and counters at start did not return within %v", t.callTimeout)}
		}
		t.sum.GPUs = append(t.sum.GPUs, h)
		t.hung = append(t.hung, !ok)
		t.stats = append(t.stats, gpuStats{})
	}
	return nil
}

// before reads GPU i's identity, error counters and links at start.
func before(i int, d nvml.Device) Health {
	h := Health{Index: i}
	if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
		h.UUID = u
	}
	if p, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		h.PCIBusID = cString(p.BusId[:])
	}
	hr := readHealth(d)
	h.DoubleBitBefore, h.RemappedRowsBefore, h.RemapFailedBefore, h.RetiredPagesPendingBefore, h.Lost = hr.dbe, hr.remapped, hr.failed, hr.pending, hr.lost
	h.RemapPendingBefore, h.RecoveryActionBefore, h.CorrectedBefore = hr.remapPending, hr.recovery, hr.corrected
	h.RemappedCorrectableBefore = hr.remappedCorr
	before := readSlowdown(d)
	for _, c := range slowdownCounters {
		if v := before[c.name]; v != nil {
			h.Slowdown = append(h.Slowdown, SlowdownCounter{Reason: c.name, BeforeNS: v})
		}
	}
	h.PCIe, h.NVLink, h.Thermal = readPCIe(d), readNVLinks(d), readThermalLimits(d)
	return h
}

// after reads GPU h's counters and links again at stop and fills what its
// samples s saw.
func after(h *Health, d nvml.Device, s gpuStats) {
	hr := readHealth(d)
	h.DoubleBitAfter, h.RemappedRowsAfter, h.RemapFailedAfter, h.RetiredPagesPendingAfter = hr.dbe, hr.remapped, hr.failed, hr.pending
	h.RemapPendingAfter, h.RecoveryActionAfter, h.CorrectedAfter = hr.remapPending, hr.recovery, hr.corrected
	h.RemappedCorrectableAfter = hr.remappedCorr
	after := readSlowdown(d)
	for j := range h.Slowdown {
		h.Slowdown[j].AfterNS = after[h.Slowdown[j].Reason]
	}
	if len(s.reasons) > 0 {
		h.SlowdownSamples = maps.Clone(s.reasons)
	}
	if h.Lost == "" {
		h.Lost = hr.lost
	}
	h.NVLink.after(d)
	if p := h.PCIe; p != nil {
		p.GenSeen, p.WidthSeen = s.genMax, s.widthMax
		// Without utilization readings the load is unknown, and an idle
		// GPU lowers its link speed: the generation is not judged.
		p.Loaded = s.utilMax != nil && *s.utilMax >= MinLoadedUtilization
		p.LoadUnknown = s.utilMax == nil
	}
	if th := h.Thermal; th != nil {
		th.GPUMaxC, th.MemMaxC = s.tempMax, s.memTempMax
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

func readHealth(d nvml.Device) health {
	var h health
	v, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	if ret == nvml.SUCCESS {
		h.dbe = ptr(v)
	}
	h.lost = lostText(h.lost, "the ECC error count", ret)
	if v, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
		h.corrected = ptr(v)
	}
	corr, unc, rp, f, ret := d.GetRemappedRows()
	if ret == nvml.SUCCESS {
		h.remapped, h.remappedCorr, h.failed, h.remapPending = ptr(unc), ptr(corr), ptr(f), ptr(rp)
	}
	h.lost = lostText(h.lost, "the remapped rows", ret)
	p, ret := d.GetRetiredPagesPendingStatus()
	if ret == nvml.SUCCESS {
		h.pending = ptr(p == nvml.FEATURE_ENABLED)
	}
	h.lost = lostText(h.lost, "the retired pages", ret)
	h.recovery, ret = recoveryAction(d)
	h.lost = lostText(h.lost, "the recovery action", ret)
	return h
}

// Lost reports whether ret says the GPU is gone (GPU_IS_LOST: fallen off
// the bus, or otherwise inaccessible) or needs a reset (RESET_REQUIRED).
// Unlike NOT_SUPPORTED, these are never a missing metric: results from
// the GPU are void.
func Lost(ret nvml.Return) bool {
	return ret == nvml.ERROR_GPU_IS_LOST || ret == nvml.ERROR_RESET_REQUIRED
}

// lostText keeps prev, or when it is empty and ret says the GPU is lost,
// names the query and the answer.
func lostText(prev, query string, ret nvml.Return) string {
	if prev != "" || !Lost(ret) {
		return prev
	}
	return "reading " + query + ": " + retText(ret)
}

func (t *Telemetry) note(format string, args ...any) {
	t.sum.Notes = append(t.sum.Notes, fmt.Sprintf(format, args...))
}

func (t *Telemetry) registerEvents() {
	set, ret := t.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		t.note("Xid and ECC events not watched: creating an NVML event set: %s", retText(ret))
		return
	}
	registered := 0
	for k, d := range t.devs {
		i := t.sum.GPUs[k].Index
		want := uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)
		if sup, ret := d.GetSupportedEventTypes(); ret == nvml.SUCCESS {
			want &= sup
		}
		if want&nvml.EventTypeXidCriticalError == 0 {
			t.note("gpu %d: Xid events not supported", i)
		}
		if want == 0 {
			continue
		}
		if ret := d.RegisterEvents(want, set); ret != nvml.SUCCESS {
			t.note("gpu %d: registering for Xid/ECC events: %s", i, retText(ret))
			continue
		}
		registered++
	}
	if registered == 0 {
		set.Free()
		return
	}
	t.set = set
}

func (t *Telemetry) sampleLoop(ctx context.Context) {
	defer t.wg.Done()
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.sample()
		}
	}
}

func (t *Telemetry) eventLoop(ctx context.Context) {
	defer t.wg.Done()
	failures := 0
	for ctx.Err() == nil {
		e, ret := t.set.Wait(uint32(eventWait / time.Millisecond))
		switch ret {
		case nvml.SUCCESS:
			failures = 0
			t.event(e)
		case nvml.ERROR_TIMEOUT:
		case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED:
			t.mu.Lock()
			if t.sum.EventsLost == "" {
				t.sum.EventsLost = "waiting for Xid/ECC events: " + retText(ret)
			}
			t.mu.Unlock()
			return
		default:
			failures++
			if failures == 3 {
				t.mu.Lock()
				t.note("event wait failed three times in a row (%s): stopped watching events", retText(ret))
				t.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(eventWait):
			}
		}
	}
}

// drainEvents takes the events already queued when Stop is called.
func (t *Telemetry) drainEvents() {
	for range 1024 {
		e, ret := t.set.Wait(0)
		if ret != nvml.SUCCESS {
			return
		}
		t.event(e)
	}
}

func (t *Telemetry) event(e nvml.EventData) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.index[e.Device]
	if !ok {
		k = -1
		if u, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
			for j, h := range t.sum.GPUs {
				if h.UUID == u {
					k = j
				}
			}
		}
	}
	i := -1
	if k >= 0 {
		i = t.sum.GPUs[k].Index
	}
	now := time.Now()
	switch {
	case e.EventType&nvml.EventTypeXidCriticalError != 0:
		x := e.EventData
		t.sum.XidEvents = append(t.sum.XidEvents, XidEvent{Time: now, GPU: i, Xid: x, Fatal: XidFatal(x), Description: XidDescription(x)})
		t.writeLine(Line{Time: now, Kind: "xid", GPU: i, Xid: ptr(x), Simulated: t.simulated})
	case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
		if k >= 0 {
			t.sum.GPUs[k].DoubleBitEvents++
		}
		t.writeLine(Line{Time: now, Kind: "ecc_dbe", GPU: i, Simulated: t.simulated})
	}
}

// sample reads every watched GPU once and writes one line each.
func (t *Telemetry) sample() {
	now := time.Now()
	type read struct {
		l    Line
		lost string
	}
	reads := make([]*read, len(t.devs))
	hung := make([]bool, len(t.devs))
	for k, d := range t.devs {
		if t.isHung(k) {
			continue
		}
		i := t.sum.GPUs[k].Index
		r, ok := within(t.callTimeout, func() read {
			l, lost := t.read(d, i, now)
			return read{l, lost}
		})
		if !ok {
			hung[k] = true
			continue
		}
		reads[k] = &r
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range reads {
		if hung[k] {
			t.markHung(k, "a sample (temperature, power, clocks, memory, utilization)")
		}
		if r == nil {
			continue
		}
		if r.lost != "" && t.sum.GPUs[k].Lost == "" {
			t.sum.GPUs[k].Lost = r.lost
		}
		t.stats[k].add(r.l)
		t.writeLine(r.l)
	}
}

// isHung reports whether the GPU at position k stopped answering.
func (t *Telemetry) isHung(k int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hung[k]
}

// markHung records that the GPU at position k did not answer the round
// of calls what within the call timeout; t.mu is held.
func (t *Telemetry) markHung(k int, what string) {
	t.hung[k] = true
	if t.sum.GPUs[k].Hung == "" {
		t.sum.GPUs[k].Hung = fmt.Sprintf("%s did not return within %v", what, t.callTimeout)
	}
}

// add counts sample l.
func (s *gpuStats) add(l Line) {
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

// summarize fills the summary's sample statistics from the GPUs at the
// positions judged.
func (t *Telemetry) summarize(judged []int) {
	s := &t.sum
	for _, k := range judged {
		g := t.stats[k]
		s.Samples += g.samples
		s.ThrottledSamples += g.throttled
		s.PowerCappedSamples += g.powerCapped
		if g.tempMin != nil && (s.TemperatureMinC == nil || *g.tempMin < *s.TemperatureMinC) {
			s.TemperatureMinC = ptr(*g.tempMin)
		}
		if g.tempMax != nil && (s.TemperatureMaxC == nil || *g.tempMax > *s.TemperatureMaxC) {
			s.TemperatureMaxC = ptr(*g.tempMax)
		}
		if g.powerMax != nil && (s.PowerMaxWatts == nil || *g.powerMax > *s.PowerMaxWatts) {
			s.PowerMaxWatts = ptr(*g.powerMax)
		}
		if g.memMax != nil && (s.MemoryUsedMaxBytes == nil || *g.memMax > *s.MemoryUsedMaxBytes) {
			s.MemoryUsedMaxBytes = ptr(*g.memMax)
		}
		for r, n := range g.reasons {
			if s.ThrottleReasons == nil {
				s.ThrottleReasons = map[string]int{}
			}
			s.ThrottleReasons[r] += n
		}
		s.JudgedGPUs = append(s.JudgedGPUs, s.GPUs[k].Index)
	}
	if s.Samples > 0 {
		s.ThrottleShare = float64(s.ThrottledSamples) / float64(s.Samples)
	}
}

// read takes one sample of GPU i; lost says which query first found the
// GPU lost.
func (t *Telemetry) read(d nvml.Device, i int, now time.Time) (l Line, lost string) {
	l = Line{Time: now, Kind: "sample", GPU: i, Simulated: t.simulated}
	temp, ret := d.GetTemperature(nvml.TEMPERATURE_GPU)
	if ret == nvml.SUCCESS {
		l.TemperatureC = ptr(temp)
	}
	lost = lostText(lost, "the temperature", ret)
	mw, ret := d.GetPowerUsage()
	if ret == nvml.SUCCESS {
		l.PowerWatts = ptr(float64(mw) / 1000)
	}
	lost = lostText(lost, "the power draw", ret)
	sm, ret := d.GetClockInfo(nvml.CLOCK_SM)
	if ret == nvml.SUCCESS {
		l.SMClockMHz = ptr(sm)
	}
	lost = lostText(lost, "the SM clock", ret)
	mem, ret := d.GetClockInfo(nvml.CLOCK_MEM)
	if ret == nvml.SUCCESS {
		l.MemClockMHz = ptr(mem)
	}
	lost = lostText(lost, "the memory clock", ret)
	reasons := d.GetCurrentClocksEventReasons
	if t.legacyReasons {
		reasons = d.GetCurrentClocksThrottleReasons
	}
	mask, ret := reasons()
	if ret == nvml.SUCCESS {
		l.ClockEventMask = ptr(mask)
		l.ClockEventReasons = ClockEventReasons(mask)
		l.Throttled = mask&ThrottleMask != 0
		l.PowerCapped = mask&nvml.ClocksEventReasonSwPowerCap != 0
	}
	lost = lostText(lost, "the clock-event reasons", ret)
	used, ret := memoryUsed(d, t.memV2)
	if ret == nvml.SUCCESS {
		l.MemoryUsedBytes = ptr(used)
	}
	lost = lostText(lost, "the memory use", ret)
	readLoad(d, &l)
	return l, lost
}

// readLoad adds the HBM temperature, the utilization and the PCIe link
// to sample l (each left out when not reported).
func readLoad(d nvml.Device, l *Line) {
	if v, ret := fieldUint(d, nvml.FI_DEV_MEMORY_TEMP); ret == nvml.SUCCESS && v > 0 && v < 1000 {
		l.MemTemperatureC = ptr(uint32(v))
	}
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		l.UtilizationPct = ptr(u.Gpu)
	}
	if v, ret := d.GetCurrPcieLinkGeneration(); ret == nvml.SUCCESS && v > 0 {
		l.PCIeGen = ptr(v)
	}
	if v, ret := d.GetCurrPcieLinkWidth(); ret == nvml.SUCCESS && v > 0 {
		l.PCIeWidth = ptr(v)
	}
}

// memoryUsed reads the device memory in use: with version 2 (v2 set)
// what processes use, without the driver's reservation (about 0.5 GiB on
// an H100 that version 1 counts as used), so a step's own use shows;
// version 1 otherwise, or when version 2 is not supported.
func memoryUsed(d nvml.Device, v2 bool) (uint64, nvml.Return) {
	if v2 {
		m, ret := d.GetMemoryInfo_v2()
		if ret == nvml.SUCCESS || Lost(ret) {
			return m.Used, ret
		}
	}
	m, ret := d.GetMemoryInfo()
	return m.Used, ret
}

// writeLine appends one JSON line; t.mu is held. The first write error is
// kept and reported by Stop.
func (t *Telemetry) writeLine(l Line) {
	if t.writeErr != nil || t.closed {
		return
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.writeErr = err
		return
	}
	b = append(b, '\n')
	if _, err := t.f.Write(b); err != nil {
		t.writeErr = fmt.Errorf("writing telemetry: %w", err)
	}
}

// Stop ends sampling and judges every watched GPU: see StopFor.
func (t *Telemetry) Stop() (*Summary, error) { return t.StopFor("") }

// StopFor ends sampling, takes a last sample, reads the error counters
// again and returns the Summary with its Verdict. The statistics and the
// verdict cover the GPU whose UUID is device (the one the step's results
// say it ran on) when it is among the watched GPUs, else every watched
// GPU; what another watched GPU shows is noted, never fatal. Calling it
// again returns the first result. The error is for a telemetry file that
// could not be written; the Summary is returned with it.
func (t *Telemetry) StopFor(device string) (*Summary, error) {
	t.stopOnce.Do(func() {
		t.cancel()
		// The loops end within an interval and an event wait, unless an
		// NVML call hangs in them.
		if _, ok := within(t.callTimeout+eventWait+t.interval, func() bool { t.wg.Wait(); return true }); !ok {
			t.mu.Lock()
			t.note("telemetry's sampling or event loop did not stop within %v (an NVML call hangs): left behind", t.callTimeout+eventWait+t.interval)
			t.mu.Unlock()
		}
		t.sample()
		if t.set != nil {
			if _, ok := within(t.callTimeout, func() bool { t.drainEvents(); t.set.Free(); return true }); !ok {
				t.mu.Lock()
				t.note("draining and freeing the NVML event set did not return within %v", t.callTimeout)
				t.mu.Unlock()
			}
		}
		for k, d := range t.devs {
			if t.isHung(k) {
				continue
			}
			h := t.sum.GPUs[k]
			st := t.stats[k]
			got, ok := within(t.callTimeout, func() Health { after(&h, d, st); return h })
			t.mu.Lock()
			if ok {
				t.sum.GPUs[k] = got
			} else {
				t.markHung(k, "reading its counters at stop")
			}
			t.mu.Unlock()
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.closed = true
		if _, ok := within(t.callTimeout, func() bool { t.release(); return true }); !ok {
			t.note("releasing NVML did not return within %v", t.callTimeout)
		}
		t.kmsgStop()
		s := &t.sum
		s.DurationSeconds = time.Since(t.start).Seconds()
		s.DeviceUUID = device
		t.summarize(t.judged(device))
		s.Verdict = verdict(s)
		err := t.writeErr
		if e := t.f.Sync(); e != nil && err == nil {
			err = fmt.Errorf("syncing telemetry: %w", e)
		}
		if e := t.f.Close(); e != nil && err == nil {
			err = fmt.Errorf("closing telemetry: %w", e)
		}
		out := *s
		t.stopped, t.stopErr = &out, err
	})
	return t.stopped, t.stopErr
}

// judged returns the positions of the GPUs the verdict covers: the one
// with UUID device when watched, else all.
func (t *Telemetry) judged(device string) []int {
	var all []int
	for k, h := range t.sum.GPUs {
		if device != "" && strings.EqualFold(h.UUID, device) {
			return []int{k}
		}
		all = append(all, k)
	}
	if device != "" {
		t.note("the results name GPU %s, which telemetry did not watch: every watched GPU is judged", device)
	}
	return all
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
