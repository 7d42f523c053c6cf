package hardware

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// Record is the hardware record every run stores and every attestation
// carries. Its JSON field names are part of the attestation predicate: do
// not rename them.
//
// A GPU metric NVML does not report (not supported, no permission) is a
// nil pointer or an empty string and is omitted from the JSON, never zero.
type Record struct {
	// Simulated is true when the GPUs come from a simulated source
	// (GPUATTEST_FAKE_GPU); the host part is always real.
	Simulated bool `json:"simulated"`
	// Host describes the machine.
	Host Host `json:"host"`
	// DriverVersion is the NVIDIA driver version, e.g. "550.54.15".
	DriverVersion string `json:"driver_version,omitempty"`
	// CUDADriverVersion is the CUDA version the driver supports, e.g. "12.4".
	CUDADriverVersion string `json:"cuda_driver_version,omitempty"`
	// NVMLVersion is the NVML library version, e.g. "12.550.54.15".
	NVMLVersion string `json:"nvml_version,omitempty"`
	// GPUs are the visible devices in NVML index order; empty (never
	// absent) when there are none, and then Reason says why. When
	// CUDAVisibleDevices is set they are only the GPUs it leaves visible,
	// in NVML order, each with its machine-wide Index.
	GPUs []GPU `json:"gpus"`
	// CUDAVisibleDevices is CUDA_VISIBLE_DEVICES as the run saw it, when
	// set: the record lists only the GPUs it names.
	CUDAVisibleDevices *string `json:"cuda_visible_devices,omitempty"`
	// Reason says why GPUs is empty.
	Reason string `json:"reason,omitempty"`
	// Digest is "sha256:" and the hex sha256 of the record's canonical
	// JSON (RFC 8785) without its volatile fields; see ComputeDigest.
	Digest string `json:"digest"`
}

// Host describes the machine the GPUs sit in.
type Host struct {
	// CPUModel is the CPU model name from /proc/cpuinfo.
	CPUModel string `json:"cpu_model,omitempty"`
	// CPUCores is the number of logical CPUs the kernel reports.
	CPUCores int `json:"cpu_cores,omitempty"`
	// MemoryBytes is the total memory (MemTotal).
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	// Kernel is the kernel release (uname -r).
	Kernel string `json:"kernel,omitempty"`
	// OS is PRETTY_NAME from /etc/os-release.
	OS string `json:"os,omitempty"`
}

// GPU is one device of the record.
type GPU struct {
	// Index is the NVML device index.
	Index int `json:"index"`
	// Error says why NVML could not open the device (lost, no
	// permission); the device is then known only by its index, and every
	// other field is empty. Only steps that see it fail on it.
	Error string `json:"error,omitempty"`
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3".
	Name string `json:"name"`
	// UUID is the device UUID ("GPU-...").
	UUID string `json:"uuid"`
	// PCIBusID is the PCI bus id, e.g. "00000000:18:00.0".
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// PCIDeviceID is the combined PCI device and vendor id, e.g. "0x233010DE".
	PCIDeviceID string `json:"pci_device_id,omitempty"`
	// VBIOS is the video BIOS version.
	VBIOS string `json:"vbios,omitempty"`
	// ComputeCapability is "major.minor", e.g. "9.0".
	ComputeCapability string `json:"compute_capability,omitempty"`
	// MemoryTotalBytes is the device memory size.
	MemoryTotalBytes *uint64 `json:"memory_total_bytes,omitempty"`
	// ECCEnabled is the current ECC mode.
	ECCEnabled *bool `json:"ecc_enabled,omitempty"`
	// MIGEnabled is the current MIG mode.
	MIGEnabled *bool `json:"mig_enabled,omitempty"`
	// PersistenceMode is whether persistence mode is on.
	PersistenceMode *bool `json:"persistence_mode,omitempty"`
	// PowerLimitWatts is the enforced power limit.
	PowerLimitWatts *float64 `json:"power_limit_watts,omitempty"`
	// MaxClocksMHz are the maximum SM and memory clocks.
	MaxClocksMHz *Clocks `json:"max_clocks_mhz,omitempty"`
	// PCIe is the maximum PCIe link generation and width of the device.
	PCIe *PCIe `json:"pcie,omitempty"`
	// RetiredPagesPending is whether retired pages wait for a reboot
	// (page retirement; GPUs with row remapping may not report it).
	RetiredPagesPending *bool `json:"retired_pages_pending,omitempty"`
	// RemappedRowsFailed is whether a row remapping has failed.
	RemappedRowsFailed *bool `json:"remapped_rows_failed,omitempty"`
	// RemappedRowsPending is whether a row remapping waits for a GPU reset
	// (row remapping: A100, H100 and later).
	RemappedRowsPending *bool `json:"remapped_rows_pending,omitempty"`
	// RecoveryAction is the action the driver asks for (NVML field
	// GET_GPU_RECOVERY_ACTION, drivers that have it): none, gpu_reset,
	// node_reboot, drain_p2p, drain_and_reset, recover_imex_domain,
	// bus_reset or system_reboot; omitted when not reported.
	RecoveryAction string `json:"recovery_action,omitempty"`
}

// Clocks are clock frequencies in MHz.
type Clocks struct {
	// SM is the streaming-multiprocessor clock.
	SM *uint32 `json:"sm,omitempty"`
	// Mem is the memory clock.
	Mem *uint32 `json:"mem,omitempty"`
}

// PCIe is a PCIe link.
type PCIe struct {
	// Gen is the PCIe generation.
	Gen *int `json:"gen,omitempty"`
	// Width is the number of lanes.
	Width *int `json:"width,omitempty"`
}

// VolatileFields are the record's JSON fields left out of the digest:
// the digest itself and the GPU health flags that change without any
// change of machine or configuration (a page retirement or row-remap
// failure shows up in preflight and telemetry, not as "different
// hardware").
var VolatileFields = []string{"digest", "gpus[].retired_pages_pending", "gpus[].remapped_rows_failed", "gpus[].remapped_rows_pending", "gpus[].recovery_action"}

// ComputeDigest returns "sha256:<hex>" of the canonical JSON (RFC 8785,
// JSON Canonicalization Scheme) of r without VolatileFields. Two
// collections on the same machine and configuration give the same digest.
func ComputeDigest(r *Record) (string, error) {
	c := *r
	c.Digest = ""
	c.GPUs = make([]GPU, len(r.GPUs))
	for i, g := range r.GPUs {
		g.RetiredPagesPending = nil
		g.RemappedRowsFailed = nil
		g.RemappedRowsPending = nil
		g.RecoveryAction = ""
		c.GPUs[i] = g
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("encoding hardware record: %w", err)
	}
	// Drop the empty digest key the struct always writes.
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("decoding hardware record: %w", err)
	}
	delete(m, "digest")
	b, err = json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encoding hardware record: %w", err)
	}
	canon, err := jsoncanonicalizer.Transform(b)
	if err != nil {
		return "", fmt.Errorf("canonicalizing hardware record: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Seal sets r's digest from its content (ComputeDigest).
func (r *Record) Seal() error {
	d, err := ComputeDigest(r)
	if err != nil {
		return err
	}
	r.Digest = d
	return nil
}

// Verify recomputes r's digest and reports an error when it does not
// match r.Digest (a record edited after collection).
func (r *Record) Verify() error {
	d, err := ComputeDigest(r)
	if err != nil {
		return err
	}
	if d != r.Digest {
		return fmt.Errorf("hardware record digest %s does not match its content (%s)\nhint: the record was changed after collection", r.Digest, d)
	}
	return nil
}

// Model returns the name of the record's first GPU that could be opened,
// or "" when there is none. Mixed machines are rare; callers that care
// check every GPU.
func (r *Record) Model() string {
	for _, g := range r.GPUs {
		if g.Error == "" {
			return g.Name
		}
	}
	return ""
}
