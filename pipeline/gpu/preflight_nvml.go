//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Probe queries free memory and running compute processes of every GPU of
// src, right before GPU steps run. With no GPU it returns an error
// matching ErrNoGPU.
func Probe(ctx context.Context, src Source) (*Live, error) {
	lib, release, err := src.Open()
	if err != nil {
		return nil, err
	}
	defer release()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("counting GPUs: %s", retText(ret))
	}
	live := &Live{Simulated: src.Simulated(), GPUs: make([]LiveGPU, 0, n)}
	self := uint32(os.Getpid())
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g := LiveGPU{Index: i}
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			g.Error = fmt.Sprintf("opening GPU %d: %s", i, retText(ret))
			live.GPUs = append(live.GPUs, g)
			continue
		}
		if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
			g.UUID = u
		}
		m, ret := d.GetMemoryInfo()
		if ret == nvml.SUCCESS {
			g.MemoryFreeBytes, g.MemoryUsedBytes = ptr(m.Free), ptr(m.Used)
		}
		g.Lost = lostText(g.Lost, "the memory use", ret)
		g.Fabric = readFabric(lib, d)
		if m, ret := d.GetComputeMode(); ret == nvml.SUCCESS {
			g.ComputeMode = computeModes[m]
			if g.ComputeMode == "" {
				g.ComputeMode = fmt.Sprintf("unknown (%d)", m)
			}
		}
		ps, ret := d.GetComputeRunningProcesses()
		g.Lost = lostText(g.Lost, "the running processes", ret)
		if ret == nvml.SUCCESS {
			g.ProcessesKnown = true
			for _, p := range ps {
				if p.Pid == self {
					continue
				}
				g.Processes = append(g.Processes, Process{PID: p.Pid, UsedMemoryBytes: p.UsedGpuMemory})
			}
		}
		live.GPUs = append(live.GPUs, g)
	}
	if path := kernelLogPath(src); path == "" {
		live.KernelLog = noSimulatedLog
	} else if kl, err := ReadKernelXids(path); err != nil {
		live.KernelLog = err.Error()
	} else {
		live.KernelXids = kl.Xids
		if live.KernelXids == nil {
			live.KernelXids = []KernelXid{}
		}
	}
	return live, nil
}

// readFabric reads d's NVSwitch fabric state through the newest call the
// library has: nvmlDeviceGetGpuFabricInfo_v4, nvmlDeviceGetGpuFabricInfoV
// (version 2), or nvmlDeviceGetGpuFabricInfo. It returns nil when NVML
// does not report it (not supported: no fabric) or says "not supported".
func readFabric(lib nvml.Interface, d nvml.Device) *Fabric {
	has := func(sym string) bool { return lib.Extensions().LookupSymbol(sym) == nil }
	var state uint8
	var status uint32
	var ret nvml.Return
	switch {
	case has("nvmlDeviceGetGpuFabricInfo_v4"):
		var info nvml.GpuFabricInfo_v4
		info, ret = d.GetGpuFabricInfo_v4()
		state, status = info.State, info.Status
	case has("nvmlDeviceGetGpuFabricInfoV"):
		var info nvml.GpuFabricInfo_v2
		info, ret = d.GetGpuFabricInfoV().V2()
		state, status = info.State, info.Status
	case has("nvmlDeviceGetGpuFabricInfo"):
		var info nvml.GpuFabricInfo
		info, ret = d.GetGpuFabricInfo()
		state, status = info.State, info.Status
	default:
		return nil
	}
	if ret != nvml.SUCCESS {
		return nil
	}
	switch state {
	case nvml.GPU_FABRIC_STATE_NOT_STARTED:
		return &Fabric{State: "not_started"}
	case nvml.GPU_FABRIC_STATE_IN_PROGRESS:
		return &Fabric{State: "in_progress"}
	case nvml.GPU_FABRIC_STATE_COMPLETED:
		st := "success"
		if r := nvml.Return(status); r != nvml.SUCCESS {
			st = retText(r)
		}
		return &Fabric{State: "completed", Status: st}
	}
	return nil // GPU_FABRIC_STATE_NOT_SUPPORTED
}

// computeModes names NVML's compute modes.
var computeModes = map[nvml.ComputeMode]string{
	nvml.COMPUTEMODE_DEFAULT:           "default",
	nvml.COMPUTEMODE_EXCLUSIVE_THREAD:  "exclusive_thread",
	nvml.COMPUTEMODE_PROHIBITED:        "prohibited",
	nvml.COMPUTEMODE_EXCLUSIVE_PROCESS: "exclusive_process",
}
