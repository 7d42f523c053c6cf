//go:build linux && cgo

package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestNVMLConstants checks the literal nvml.h values the portable tables
// carry (so the package builds without go-nvml) against go-nvml's.
func TestNVMLConstants(t *testing.T) {
	names := map[string]uint64{
		"gpu_idle": nvml.ClocksEventReasonGpuIdle, "applications_clocks_setting": nvml.ClocksEventReasonApplicationsClocksSetting,
		"sw_power_cap": nvml.ClocksEventReasonSwPowerCap, "hw_slowdown": nvml.ClocksThrottleReasonHwSlowdown,
		"sync_boost": nvml.ClocksEventReasonSyncBoost, "sw_thermal_slowdown": nvml.ClocksEventReasonSwThermalSlowdown,
		"hw_thermal_slowdown": nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_power_brake_slowdown": nvml.ClocksThrottleReasonHwPowerBrakeSlowdown,
		"display_clock_setting": nvml.ClocksEventReasonDisplayClockSetting,
	}
	if len(clockReasonNames) != len(names) {
		t.Errorf("clockReasonNames has %d entries, want %d", len(clockReasonNames), len(names))
	}
	for _, r := range clockReasonNames {
		if want, ok := names[r.name]; !ok || r.bit != want {
			t.Errorf("clockReasonNames %s = %#x, want go-nvml's %#x", r.name, r.bit, want)
		}
	}
	mask := uint64(nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksEventReasonSwThermalSlowdown |
		nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown)
	if ThrottleMask != mask {
		t.Errorf("ThrottleMask = %#x, want %#x", ThrottleMask, mask)
	}
	fields := map[string]uint32{
		"sw_power_cap": nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP, "sw_thermal_slowdown": nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
		"hw_thermal_slowdown": nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN, "hw_power_brake_slowdown": nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
	}
	for _, c := range slowdownCounters {
		if c.field != fields[c.name] || c.bit != names[c.name] {
			t.Errorf("slowdownCounters %s = field %d bit %#x, want %d %#x", c.name, c.field, c.bit, fields[c.name], names[c.name])
		}
	}
}
