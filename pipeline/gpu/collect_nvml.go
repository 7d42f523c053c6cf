//go:build linux && cgo

package gpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/gpuattest/gpuattest/attest/hardware"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
)

// SourceFromEnv returns the source the CLI uses: simulated GPUs when the
// value of FakeGPUEnv (passed as fake) is set, the real NVML otherwise.
// Simulated GPUs sign evidence under the PKI FakeGPUCAEnv names, when
// set (see Simulated.EnableEvidence).
func SourceFromEnv(fake string) (Source, error) {
	if fake == "" {
		return NVML(""), nil
	}
	s, err := Simulate(fake)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FakeGPUEnv, err)
	}
	if dir := os.Getenv(FakeGPUCAEnv); dir != "" {
		ca, err := gpuevidencetest.Load(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", FakeGPUCAEnv, err)
		}
		if err := s.EnableEvidence(ca); err != nil {
			return nil, fmt.Errorf("%s: %w", FakeGPUCAEnv, err)
		}
	}
	return s, nil
}

// WithFakeGPU serves simulated GPUs described by spec (see Simulate); an
// empty spec keeps the real NVML. The CLI passes os.Getenv(FakeGPUEnv).
func WithFakeGPU(spec string) Option {
	return func(o *options) error {
		if spec == "" {
			return nil
		}
		s, err := Simulate(spec)
		if err != nil {
			return err
		}
		o.src = s
		return nil
	}
}

// collectGPUs fills rec's GPUs (or its Reason) from o.src.
func collectGPUs(ctx context.Context, o *options, rec *hardware.Record) error {
	lib, release, err := o.src.Open()
	if err != nil {
		var ue *UnavailableError
		if !errors.As(err, &ue) {
			return fmt.Errorf("opening %s: %w", o.src, err)
		}
		rec.Reason = ue.Reason
		o.logger.Info("no gpu", "source", o.src.String(), "reason", ue.Reason)
	} else {
		defer release()
		if err := collectNVML(ctx, lib, rec, o.logger); err != nil {
			return err
		}
		if o.getenv != nil {
			restrictVisible(rec, o.getenv, o.logger)
		}
	}
	return nil
}

// cudaDriverVersion asks nvmlSystemGetCudaDriverVersion_v2, which reads
// the version from the CUDA driver library itself (libcuda.so, what the
// harness loads), and falls back to the original call on libraries that
// lack it.
func cudaDriverVersion(lib nvml.Interface) (int, nvml.Return) {
	if lib.Extensions().LookupSymbol("nvmlSystemGetCudaDriverVersion_v2") == nil {
		if v, ret := lib.SystemGetCudaDriverVersion_v2(); ret == nvml.SUCCESS {
			return v, ret
		}
	}
	return lib.SystemGetCudaDriverVersion()
}

func collectNVML(ctx context.Context, lib nvml.Interface, rec *hardware.Record, log *slog.Logger) error {
	q := query{log: log}
	if v, ret := lib.SystemGetDriverVersion(); q.ok("driver_version", ret) {
		rec.DriverVersion = v
	}
	if v, ret := cudaDriverVersion(lib); q.ok("cuda_driver_version", ret) {
		rec.CUDADriverVersion = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
	}
	if v, ret := lib.SystemGetNVMLVersion(); q.ok("nvml_version", ret) {
		rec.NVMLVersion = v
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		rec.Reason = "NVML could not count devices: " + retText(ret)
		return nil
	}
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			// A device NVML lists but cannot open (lost, no permission) is
			// recorded with its error, not skipped silently and not fatal:
			// only the steps that see it fail (preflight).
			rec.GPUs = append(rec.GPUs, hardware.GPU{Index: i, Error: fmt.Sprintf("opening GPU %d: %s", i, retText(ret))})
			log.Warn("gpu not opened", "index", i, "nvml", retText(ret))
			continue
		}
		rec.GPUs = append(rec.GPUs, readGPU(i, dev, q))
	}
	if len(rec.GPUs) == 0 {
		rec.Reason = "NVIDIA driver loaded but it reports zero GPUs"
	}
	return nil
}

func (q query) ok(metric string, ret nvml.Return) bool {
	if ret == nvml.SUCCESS {
		return true
	}
	q.log.Debug("metric not reported", "metric", metric, "nvml", retText(ret))
	return false
}

func readGPU(i int, d nvml.Device, q query) hardware.GPU {
	g := hardware.GPU{Index: i}
	if v, ret := d.GetName(); q.ok("name", ret) {
		g.Name = v
	}
	if v, ret := d.GetUUID(); q.ok("uuid", ret) {
		g.UUID = v
	}
	if p, ret := d.GetPciInfo(); q.ok("pci", ret) {
		g.PCIBusID = cString(p.BusId[:])
		if p.PciDeviceId != 0 {
			g.PCIDeviceID = fmt.Sprintf("0x%08X", p.PciDeviceId)
		}
	}
	if v, ret := d.GetVbiosVersion(); q.ok("vbios", ret) {
		g.VBIOS = v
	}
	if maj, min, ret := d.GetCudaComputeCapability(); q.ok("compute_capability", ret) {
		g.ComputeCapability = fmt.Sprintf("%d.%d", maj, min)
	}
	if m, ret := d.GetMemoryInfo(); q.ok("memory_total_bytes", ret) {
		g.MemoryTotalBytes = ptr(m.Total)
	}
	if cur, _, ret := d.GetEccMode(); q.ok("ecc_enabled", ret) {
		g.ECCEnabled = ptr(cur == nvml.FEATURE_ENABLED)
	}
	if cur, _, ret := d.GetMigMode(); q.ok("mig_enabled", ret) {
		g.MIGEnabled = ptr(cur == nvml.DEVICE_MIG_ENABLE)
	}
	if v, ret := d.GetPersistenceMode(); q.ok("persistence_mode", ret) {
		g.PersistenceMode = ptr(v == nvml.FEATURE_ENABLED)
	}
	if mw, ret := d.GetEnforcedPowerLimit(); q.ok("power_limit_watts", ret) {
		g.PowerLimitWatts = ptr(float64(mw) / 1000)
	}
	var clk hardware.Clocks
	if v, ret := d.GetMaxClockInfo(nvml.CLOCK_SM); q.ok("max_clocks_mhz.sm", ret) {
		clk.SM = ptr(v)
	}
	if v, ret := d.GetMaxClockInfo(nvml.CLOCK_MEM); q.ok("max_clocks_mhz.mem", ret) {
		clk.Mem = ptr(v)
	}
	if clk.SM != nil || clk.Mem != nil {
		g.MaxClocksMHz = &clk
	}
	var link hardware.PCIe
	if v, ret := d.GetMaxPcieLinkGeneration(); q.ok("pcie.gen", ret) {
		link.Gen = ptr(v)
	}
	if v, ret := d.GetMaxPcieLinkWidth(); q.ok("pcie.width", ret) {
		link.Width = ptr(v)
	}
	if link.Gen != nil || link.Width != nil {
		g.PCIe = &link
	}
	if v, ret := d.GetRetiredPagesPendingStatus(); q.ok("retired_pages_pending", ret) {
		g.RetiredPagesPending = ptr(v == nvml.FEATURE_ENABLED)
	}
	if _, _, pending, failed, ret := d.GetRemappedRows(); q.ok("remapped_rows_failed", ret) {
		g.RemappedRowsFailed, g.RemappedRowsPending = ptr(failed), ptr(pending)
	}
	if a, ret := recoveryAction(d); q.ok("recovery_action", ret) {
		g.RecoveryAction = a
	}
	return g
}

// recoveryActions name NVML's GPU recovery actions.
var recoveryActions = map[uint64]string{
	uint64(nvml.GPU_RECOVERY_ACTION_NONE):                "none",
	uint64(nvml.GPU_RECOVERY_ACTION_GPU_RESET):           "gpu_reset",
	uint64(nvml.GPU_RECOVERY_ACTION_NODE_REBOOT):         "node_reboot",
	uint64(nvml.GPU_RECOVERY_ACTION_DRAIN_P2P):           "drain_p2p",
	uint64(nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET):     "drain_and_reset",
	uint64(nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN): "recover_imex_domain",
	uint64(nvml.GPU_RECOVERY_ACTION_BUS_RESET):           "bus_reset",
	uint64(nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT):       "system_reboot",
}

// recoveryAction reads the field value NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
// (field 230 in go-nvml v0.13.4-0's nvml.h; drivers that predate it
// answer the field NOT_SUPPORTED or INVALID_ARGUMENT).
func recoveryAction(d nvml.Device) (string, nvml.Return) {
	v, ret := fieldUint(d, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION)
	if ret != nvml.SUCCESS {
		return "", ret
	}
	if a, ok := recoveryActions[v]; ok {
		return a, nvml.SUCCESS
	}
	return fmt.Sprintf("unknown (%d)", v), nvml.SUCCESS
}

// fieldUint reads one integer field value of d.
func fieldUint(d nvml.Device, field uint32) (uint64, nvml.Return) {
	fv := []nvml.FieldValue{{FieldId: field}}
	if ret := d.GetFieldValues(fv); ret != nvml.SUCCESS {
		return 0, ret
	}
	if r := nvml.Return(fv[0].NvmlReturn); r != nvml.SUCCESS {
		return 0, r
	}
	b := fv[0].Value
	switch nvml.ValueType(fv[0].ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_SIGNED_INT:
		return uint64(binary.LittleEndian.Uint32(b[:4])), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(binary.LittleEndian.Uint16(b[:2])), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return binary.LittleEndian.Uint64(b[:]), nvml.SUCCESS
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}
