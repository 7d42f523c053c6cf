package runtypes

import "time"

// TelemetryLine is one line of telemetry.jsonl: a sample of one GPU (Kind
// "sample") or an event NVML delivered (Kind "xid" or "ecc_dbe").
type TelemetryLine struct {
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
	// Throttled is whether a reason in gpu.ThrottleMask (a slowdown, not the
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
