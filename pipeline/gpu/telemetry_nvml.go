//go:build linux && cgo

package gpu

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

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
		t.writeLine(runtypes.TelemetryLine{Time: now, Kind: "xid", GPU: i, Xid: ptr(x), Simulated: t.simulated})
	case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
		if k >= 0 {
			t.sum.GPUs[k].DoubleBitEvents++
		}
		t.writeLine(runtypes.TelemetryLine{Time: now, Kind: "ecc_dbe", GPU: i, Simulated: t.simulated})
	}
}

// sample reads every watched GPU once and writes one line each.
func (t *Telemetry) sample() {
	now := time.Now()
	type read struct {
		l    runtypes.TelemetryLine
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
func (t *Telemetry) read(d nvml.Device, i int, now time.Time) (l runtypes.TelemetryLine, lost string) {
	l = runtypes.TelemetryLine{Time: now, Kind: "sample", GPU: i, Simulated: t.simulated}
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
func readLoad(d nvml.Device, l *runtypes.TelemetryLine) {
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
func (t *Telemetry) writeLine(l runtypes.TelemetryLine) {
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

// kmsgStart notes the kernel log's last record, so that Stop reads the
// Xids logged during the step; a log that cannot be read is noted.
func (t *Telemetry) kmsgStart(src Source) {
	t.kmsg = kernelLogPath(src)
	if t.kmsg == "" {
		return
	}
	kl, err := ReadKernelXids(t.kmsg)
	if err != nil {
		t.note("Xids in the kernel log not watched: %v", err)
		return
	}
	t.kmsgSeq = ptr(kl.LastSeq)
}

// kmsgStop adds the Xids the driver logged for a watched GPU during the
// step that no NVML event reported (a missed event, or a driver that
// does not deliver them); t.mu is held.
func (t *Telemetry) kmsgStop() {
	if t.kmsgSeq == nil {
		return
	}
	kl, err := ReadKernelXids(t.kmsg)
	if err != nil {
		t.note("Xids in the kernel log not read at stop: %v", err)
		return
	}
	for _, x := range kl.Xids {
		if x.Seq <= *t.kmsgSeq {
			continue
		}
		i := -1
		for _, h := range t.sum.GPUs {
			if h.PCIBusID != "" && samePCI(x.PCIBusID, h.PCIBusID) {
				i = h.Index
			}
		}
		if i < 0 || slices.ContainsFunc(t.sum.XidEvents, func(e XidEvent) bool { return e.GPU == i && e.Xid == x.Xid }) {
			continue
		}
		now := time.Now()
		t.sum.XidEvents = append(t.sum.XidEvents, XidEvent{Time: now, GPU: i, Xid: x.Xid, Fatal: x.Fatal, Description: XidDescription(x.Xid), Source: "kernel log"})
		t.writeLine(runtypes.TelemetryLine{Time: now, Kind: "xid", GPU: i, Xid: ptr(x.Xid), Simulated: t.simulated})
	}
}

// kernelLogPath is the kernel log Probe and telemetry read for src:
// KmsgPath for the real NVML, what SetKernelLog gave a simulated source
// (none by default: the machine's own log says nothing about simulated
// GPUs).
func kernelLogPath(src Source) string {
	if s, ok := src.(*Simulated); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.kmsg
	}
	return KmsgPath
}
