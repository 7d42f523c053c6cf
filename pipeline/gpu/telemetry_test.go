//go:build linux && cgo

package gpu

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// runTelemetry starts telemetry on s, sampling every 5ms; once the
// sampler has taken a sample of its own (besides the one at start), it
// runs during, waits for the next sample, and stops it. The waits poll
// the sample count against a deadline, not a fixed sleep, so a loaded
// machine slows the test instead of failing it.
func runTelemetry(t *testing.T, s Source, during func()) (*Summary, []runtypes.TelemetryLine) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "telemetry.jsonl")
	tel, err := StartTelemetry(t.Context(), s, path, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	n := waitSample(t, tel, samplesTaken(tel))
	if during != nil {
		during()
	}
	waitSample(t, tel, n)
	start := time.Now()
	sum, err := tel.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Stop took %v", d)
	}
	again, err := tel.Stop()
	if err != nil || again.Samples != sum.Samples {
		t.Errorf("second Stop = %+v, %v", again, err)
	}
	return sum, readLines(t, path)
}

// readLines reads a telemetry file.
func readLines(t *testing.T, path string) []runtypes.TelemetryLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []runtypes.TelemetryLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l runtypes.TelemetryLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad telemetry line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// samplesTaken is the number of lines tel's sampler has written.
func samplesTaken(tel *Telemetry) int {
	tel.mu.Lock()
	defer tel.mu.Unlock()
	n := 0
	for _, g := range tel.stats {
		n += g.samples
	}
	return n
}

// waitSample waits until tel has taken more than n samples, at most 10 s,
// and returns the count.
func waitSample(t *testing.T, tel *Telemetry, n int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := samplesTaken(tel); m > n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("telemetry took no sample in 10 s (%d so far)", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTelemetryHealthy(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:2")
	sum, lines := runTelemetry(t, s, nil)
	if sum.Verdict.Status != VerdictPassed || len(sum.Verdict.Reasons) != 0 {
		t.Errorf("verdict = %+v, want passed", sum.Verdict)
	}
	if err := sum.Verdict.Err(); err != nil {
		t.Error(err)
	}
	// At least the first and the last sample of both GPUs.
	if sum.Samples < 4 || sum.Samples%2 != 0 {
		t.Errorf("samples = %d, want an even number >= 4", sum.Samples)
	}
	if len(lines) != sum.Samples {
		t.Errorf("%d lines in the file, summary says %d samples", len(lines), sum.Samples)
	}
	for _, l := range lines {
		if !l.Simulated || l.Kind != "sample" || l.TemperatureC == nil || l.PowerWatts == nil || l.SMClockMHz == nil || l.MemoryUsedBytes == nil {
			t.Fatalf("incomplete line %+v", l)
		}
		if diff := cmp.Diff([]string{"gpu_idle"}, l.ClockEventReasons); diff != "" || l.Throttled {
			t.Errorf("idle GPU reasons (-want +got):\n%s", diff)
		}
	}
	if !sum.Simulated || sum.TemperatureMinC == nil || *sum.TemperatureMinC < 33 || *sum.TemperatureMaxC > 36 || *sum.PowerMaxWatts < 71 || *sum.PowerMaxWatts > 76 {
		t.Errorf("summary ranges wrong: %+v", sum)
	}
	if sum.ThrottledSamples != 0 || sum.ThrottleShare != 0 {
		t.Errorf("throttled = %d (%v)", sum.ThrottledSamples, sum.ThrottleShare)
	}
	if len(sum.GPUs) != 2 || *sum.GPUs[0].DoubleBitBefore != 0 || *sum.GPUs[0].DoubleBitAfter != 0 || *sum.GPUs[1].RemapFailedAfter {
		t.Errorf("health = %+v", sum.GPUs)
	}
}

func TestTelemetryVerdicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		during      func(*Simulated)
		wantStatus  VerdictStatus
		wantReasons []string
		wantNote    string
	}{
		{
			name:        "fatal xid 79",
			during:      func(s *Simulated) { s.InjectXid(1, 79) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 1: fatal Xid 79 (GPU has fallen off the bus)"},
		},
		{
			name:        "fatal xid 48 and 95",
			during:      func(s *Simulated) { s.InjectXid(0, 48); s.InjectXid(0, 95) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 0: fatal Xid 48 (double-bit ECC error)", "gpu 0: fatal Xid 95 (uncontained ECC error)"},
		},
		{
			name:       "application xid 13 is noted, not fatal",
			during:     func(s *Simulated) { s.InjectXid(0, 13) },
			wantStatus: VerdictPassed,
			wantNote:   "gpu 0: Xid 13 (graphics engine exception (usually an application error)), not fatal",
		},
		{
			name:        "new double-bit ECC error",
			during:      func(s *Simulated) { s.InjectDoubleBitECC(1, 2) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 1: 2 new double-bit ECC error(s) (volatile uncorrected count 0 -> 2)"},
		},
		{
			name:        "fatal xid 154",
			during:      func(s *Simulated) { s.InjectXid(1, 154) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 1: fatal Xid 154 (GPU recovery action changed (reset, drain or reboot required))"},
		},
		{
			name:        "uncorrectable remapped rows rise",
			during:      func(s *Simulated) { s.AddRemappedRows(1, 2) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 1: 2 row(s) remapped for uncorrectable memory errors during the step (0 -> 2)"},
		},
		{
			name:        "row remapping pending",
			during:      func(s *Simulated) { s.SetRemapPending(0, true) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 0: row remapping pending (during the step): a faulty memory row is in use until the GPU is reset"},
		},
		{
			name:        "recovery action",
			during:      func(s *Simulated) { s.SetRecoveryAction(0, nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 0: the driver asks for recovery action drain_and_reset"},
		},
		{
			// Xid 32, 38 and 109 were only notes.
			name:       "fatal xid 32, 38 and 109",
			during:     func(s *Simulated) { s.InjectXid(0, 32); s.InjectXid(1, 38); s.InjectXid(1, 109) },
			wantStatus: VerdictFailed,
			wantReasons: []string{"gpu 0: fatal Xid 32 (invalid or corrupted push buffer stream)", "gpu 1: fatal Xid 38 (driver firmware error)",
				"gpu 1: fatal Xid 109 (context switch timeout)"},
		},
		{
			name:        "row-remap failure",
			during:      func(s *Simulated) { s.SetRemapFailure(0, true) },
			wantStatus:  VerdictFailed,
			wantReasons: []string{"gpu 0: row-remap failure (during the step)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustSimulate(t, "a100:2")
			sum, lines := runTelemetry(t, s, func() { tt.during(s) })
			if sum.Verdict.Status != tt.wantStatus {
				t.Errorf("status = %s, want %s (%+v)", sum.Verdict.Status, tt.wantStatus, sum.Verdict)
			}
			if diff := cmp.Diff(tt.wantReasons, sum.Verdict.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if tt.wantNote != "" && !strings.Contains(strings.Join(sum.Notes, "\n"), tt.wantNote) {
				t.Errorf("notes %q lack %q", sum.Notes, tt.wantNote)
			}
			if tt.wantStatus == VerdictFailed {
				if err := sum.Verdict.Err(); err == nil || !strings.Contains(err.Error(), tt.wantReasons[0]) {
					t.Errorf("Verdict.Err = %v", err)
				}
			}
			var xids int
			for _, l := range lines {
				if l.Kind == "xid" {
					xids++
				}
			}
			if xids != len(sum.XidEvents) {
				t.Errorf("%d xid lines, %d xid events", xids, len(sum.XidEvents))
			}
		})
	}
}

func TestTelemetryDoubleBitEventWithoutCounter(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100")
	s.Device(0).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	sum, _ := runTelemetry(t, s, func() { s.InjectDoubleBitECC(0, 1) })
	want := []string{"gpu 0: 1 double-bit ECC event(s) received"}
	if diff := cmp.Diff(want, sum.Verdict.Reasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
}

// A GPU at its software power cap is a GPU loaded as it should be: its
// samples are power-capped, not throttled, and pass. A GPU in a thermal
// slowdown fails the step, named. Before, sw_power_cap counted as
// throttling and a slowdown only as a share of samples: both passed.
func TestTelemetryThrottle(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:2")
	s.SetClockEventReasons(0, nvml.ClocksEventReasonSwPowerCap|nvml.ClocksThrottleReasonHwThermalSlowdown)
	s.SetClockEventReasons(1, nvml.ClocksEventReasonSwPowerCap)
	sum, lines := runTelemetry(t, s, nil)
	if sum.ThrottledSamples != sum.Samples/2 || sum.ThrottleShare != 0.5 || sum.PowerCappedSamples != sum.Samples {
		t.Errorf("throttled %d of %d (share %v), power-capped %d; want half throttled, all capped", sum.ThrottledSamples, sum.Samples, sum.ThrottleShare, sum.PowerCappedSamples)
	}
	want := map[string]int{"hw_thermal_slowdown": sum.Samples / 2}
	if diff := cmp.Diff(want, sum.ThrottleReasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	wantReason := fmt.Sprintf("gpu 0: hw_thermal_slowdown in %d sample(s): the clocks were cut by a fault", sum.Samples/2)
	if sum.Verdict.Status != VerdictFailed || len(sum.Verdict.Reasons) != 1 || !strings.HasPrefix(sum.Verdict.Reasons[0], wantReason) {
		t.Errorf("verdict %+v; want failed: %s", sum.Verdict, wantReason)
	}
	for _, l := range lines {
		if l.Throttled != (l.GPU == 0) || !l.PowerCapped {
			t.Errorf("line %+v: throttled %v capped %v", l, l.Throttled, l.PowerCapped)
		}
	}
}

// NVML's cumulative clock-event counters are read before and after the
// step: a HW power brake shorter than the sampling interval (no sample
// shows it) still fails the step, with its duration; time at the power
// cap is recorded and passes.
func TestTelemetrySlowdownCounters(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:2")
	sum, _ := runTelemetry(t, s, func() {
		s.AddSlowdown(0, nvml.ClocksEventReasonSwPowerCap, 3*time.Second)
		s.AddSlowdown(1, nvml.ClocksEventReasonSwPowerCap, 3*time.Second)
		s.AddSlowdown(1, nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, 250*time.Millisecond)
	})
	want := "gpu 1: hw_power_brake_slowdown for 0.250 s during the step (NVML's cumulative counter 0 -> 250000000 ns)"
	if sum.Verdict.Status != VerdictFailed || len(sum.Verdict.Reasons) != 1 || !strings.HasPrefix(sum.Verdict.Reasons[0], want) {
		t.Errorf("verdict %+v; want only: %s", sum.Verdict, want)
	}
	var capped *SlowdownCounter
	for i, c := range sum.GPUs[0].Slowdown {
		if c.Reason == "sw_power_cap" {
			capped = &sum.GPUs[0].Slowdown[i]
		}
	}
	if capped == nil || capped.BeforeNS == nil || capped.AfterNS == nil || *capped.AfterNS-*capped.BeforeNS != uint64(3*time.Second) || len(sum.GPUs[0].Slowdown) != 4 {
		t.Errorf("gpu 0 counters %+v; want the 4 counters, sw_power_cap up 3 s", sum.GPUs[0].Slowdown)
	}
}

// TestTelemetryMemoryUsed: memory info version 2, where the library has
// it, counts what processes use without the driver's reservation
// (version 1 counted the 1 MiB the simulated driver reserves as used);
// a library without it falls back to version 1.
func TestTelemetryMemoryUsed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		v2   bool
		want uint64
	}{{"v2", true, 10 << 30}, {"v1 only", false, 10<<30 + 1<<20}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustSimulate(t, "h200")
			if !tt.v2 {
				s.server.LookupSymbolFunc = func(name string) error {
					if name == "nvmlDeviceGetMemoryInfo_v2" {
						return errors.New("undefined symbol")
					}
					return nil
				}
				s.Device(0).GetMemoryInfo_v2Func = nil // calling it would panic
			}
			sum, _ := runTelemetry(t, s, func() { s.AddProcess(0, 99, 10<<30) })
			if sum.MemoryUsedMaxBytes == nil || *sum.MemoryUsedMaxBytes != tt.want {
				t.Errorf("memory used max = %v, want %d", ptrText(sum.MemoryUsedMaxBytes), tt.want)
			}
		})
	}
}

func ptrText(p *uint64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatUint(*p, 10)
}

func TestTelemetryNoGPU(t *testing.T) {
	t.Parallel()
	_, err := StartTelemetry(t.Context(), NVML(filepath.Join(t.TempDir(), "missing.so")), filepath.Join(t.TempDir(), "t.jsonl"), time.Second)
	if !errors.Is(err, ErrNoGPU) {
		t.Errorf("err = %v, want ErrNoGPU", err)
	}
}

func TestTelemetryIntervalTooShort(t *testing.T) {
	t.Parallel()
	_, err := StartTelemetry(t.Context(), mustSimulate(t, "h100"), filepath.Join(t.TempDir(), "t.jsonl"), time.Microsecond)
	if err == nil || !strings.Contains(err.Error(), "telemetry interval 1µs: expected at least 1ms") {
		t.Errorf("err = %v", err)
	}
}

func TestTelemetryBadPath(t *testing.T) {
	t.Parallel()
	_, err := StartTelemetry(t.Context(), mustSimulate(t, "h100"), filepath.Join(t.TempDir(), "no", "such", "dir", "t.jsonl"), time.Second)
	if err == nil || !strings.Contains(err.Error(), "creating telemetry file") {
		t.Errorf("err = %v", err)
	}
}

func TestFatalXids(t *testing.T) {
	t.Parallel()
	want := []uint64{32, 38, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 109, 119, 120, 140, 144, 145, 146, 147, 148, 149, 150, 154}
	if diff := cmp.Diff(want, FatalXids()); diff != "" {
		t.Error(diff)
	}
	for x, name := range map[uint64]string{144: "NVLINK_SAW_ERROR", 147: "NVLINK_TREX_ERROR", 150: "NVLINK_MSE_ERROR"} {
		if d := XidDescription(x); !strings.Contains(d, name) {
			t.Errorf("Xid %d: %q does not name %s", x, d, name)
		}
	}
	if XidFatal(13) || !XidFatal(79) || XidDescription(9999) != "Xid 9999" {
		t.Error("xid table wrong")
	}
}

func TestTelemetryLegacyDriver(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "a100")
	// A driver older than R535 lacks nvmlDeviceGetCurrentClocksEventReasons.
	s.server.LookupSymbolFunc = func(name string) error {
		if name == "nvmlDeviceGetCurrentClocksEventReasons" {
			return errors.New("undefined symbol")
		}
		return nil
	}
	s.Device(0).GetCurrentClocksEventReasonsFunc = nil // calling it would panic
	s.SetClockEventReasons(0, nvml.ClocksEventReasonSwPowerCap)
	sum, _ := runTelemetry(t, s, nil)
	if sum.PowerCappedSamples != sum.Samples || sum.Samples == 0 || sum.ThrottledSamples != 0 {
		t.Errorf("power-capped %d, throttled %d of %d samples; want all power-capped, none throttled", sum.PowerCappedSamples, sum.ThrottledSamples, sum.Samples)
	}
}

// TestTelemetryLostGPU: a GPU that NVML reports lost or needing a reset
// during the step fails the verdict (before, its samples and after-step
// counters came back empty, as for a metric it does not support, and the
// step passed).
func TestTelemetryLostGPU(t *testing.T) {
	t.Parallel()
	for _, ret := range []nvml.Return{nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED} {
		t.Run(retText(ret), func(t *testing.T) {
			t.Parallel()
			s := mustSimulate(t, "h100:2")
			sum, _ := runTelemetry(t, s, func() { s.SetLost(1, ret) })
			if sum.Verdict.Status != VerdictFailed {
				t.Fatalf("verdict %+v, want failed", sum.Verdict)
			}
			want := "gpu 1 (" + simUUID("h100", 1) + "): lost during the step (reading the temperature: " + retText(ret) + ")"
			if !strings.Contains(strings.Join(sum.Verdict.Reasons, "\n"), want) {
				t.Errorf("reasons %q lack %q", sum.Verdict.Reasons, want)
			}
			if sum.GPUs[0].Lost != "" || sum.GPUs[1].Lost == "" {
				t.Errorf("lost = %q, %q; want only gpu 1", sum.GPUs[0].Lost, sum.GPUs[1].Lost)
			}
		})
	}
}

// TestTelemetryEventWaitLost: an event wait that answers RESET_REQUIRED
// fails the verdict (before, the watcher stopped after three failures
// with only a note).
func TestTelemetryEventWaitLost(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "a100")
	s.server.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_RESET_REQUIRED },
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	s.Device(0).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	sum, _ := runTelemetry(t, s, nil)
	want := "waiting for Xid/ECC events: GPU reset required (NVML 16)"
	if sum.Verdict.Status != VerdictFailed || !strings.Contains(strings.Join(sum.Verdict.Reasons, "\n"), want) {
		t.Errorf("verdict %+v, want failed naming %q", sum.Verdict, want)
	}
}

// On the simulated 8-GPU node a GPU lost during the step is named by its
// UUID, also when the event wait is what answered GPU_IS_LOST (NVML does
// not say which GPU there: the GPUs found lost at stop are named).
func TestTelemetryLostGPUByUUID(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:8")
	sum, _ := runTelemetry(t, s, func() { s.SetLost(5, nvml.ERROR_GPU_IS_LOST) })
	uuid := simUUID("h100", 5)
	all := strings.Join(sum.Verdict.Reasons, "\n")
	if !strings.Contains(all, "gpu 5 ("+uuid+"): lost during the step") {
		t.Errorf("reasons %q do not name gpu 5 by UUID", sum.Verdict.Reasons)
	}
	if sum.EventsLost != "" && !strings.Contains(all, "lost: gpu 5 ("+uuid+") fell off the bus") {
		t.Errorf("event wait lost (%s) but reasons %q do not name gpu 5", sum.EventsLost, sum.Verdict.Reasons)
	}
	for i := range 8 {
		if i != 5 && strings.Contains(all, simUUID("h100", i)) {
			t.Errorf("gpu %d named in %q", i, sum.Verdict.Reasons)
		}
	}
	if got := lostGPUs([]Health{{Index: 0}}); !strings.Contains(got, "none of the watched GPUs") {
		t.Errorf("lostGPUs without a lost GPU = %q", got)
	}
}
