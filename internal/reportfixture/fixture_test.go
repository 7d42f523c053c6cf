package reportfixture

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// The fixture's telemetry follows telemetry's rules: samples at the
// software power cap (expected under load) are power-capped, not
// throttled; only a slowdown counts as throttled.
func TestTelemetryPowerCapIsNotThrottle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := Write(dir, Options{Telemetry: 200e9, GPUs: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "steps", "burnin", gpu.TelemetryFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var capped, throttled int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l runtypes.TelemetryLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Kind != "sample" {
			continue
		}
		isCap := slices.Contains(l.ClockEventReasons, "sw_power_cap")
		if isCap != l.PowerCapped || l.Throttled != (l.ClockEventMask != nil && *l.ClockEventMask&gpu.ThrottleMask != 0) {
			t.Fatalf("sample %+v: power_capped %v, throttled %v disagree with its reasons %v", l, l.PowerCapped, l.Throttled, l.ClockEventReasons)
		}
		if l.PowerCapped {
			capped++
		}
		if l.Throttled {
			throttled++
		}
	}
	if capped == 0 || throttled == 0 {
		t.Errorf("%d power-capped and %d throttled samples, want both", capped, throttled)
	}
}
