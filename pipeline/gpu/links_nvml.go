//go:build linux && cgo

package gpu

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// readNVLinks reads d's link states (link 0 up, until NVML says the link
// does not exist) and error totals; nil when the GPU has no NVLink.
func readNVLinks(d nvml.Device) *NVLinks {
	var active []int
	links := 0
	for l := range nvml.NVLINK_MAX_LINKS {
		st, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS {
			break
		}
		links++
		if st == nvml.FEATURE_ENABLED {
			active = append(active, l)
		}
	}
	if links == 0 {
		return nil
	}
	n := &NVLinks{ActiveBefore: active}
	n.CRCBefore, n.ReplayBefore, n.RecoveryBefore = readLinkErrors(d)
	return n
}

func readLinkErrors(d nvml.Device) (crc, replay, recovery *uint64) {
	get := func(f uint32) *uint64 {
		if v, ret := fieldUint(d, f); ret == nvml.SUCCESS {
			return ptr(v)
		}
		return nil
	}
	return get(nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL), get(nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL), get(nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL)
}

// after reads the links' state and errors again at stop.
func (n *NVLinks) after(d nvml.Device) {
	if n == nil {
		return
	}
	if now := readNVLinks(d); now != nil {
		n.ActiveAfter = now.ActiveBefore
		n.CRCAfter, n.ReplayAfter, n.RecoveryAfter = now.CRCBefore, now.ReplayBefore, now.RecoveryBefore
	} else {
		n.ActiveAfter = []int{}
	}
}

// readPCIe reads d's supported link (the samples fill what was seen).
func readPCIe(d nvml.Device) *PCIeLink {
	var p PCIeLink
	if v, ret := d.GetMaxPcieLinkGeneration(); ret == nvml.SUCCESS && v > 0 {
		p.MaxGen = ptr(v)
	}
	if v, ret := d.GetMaxPcieLinkWidth(); ret == nvml.SUCCESS && v > 0 {
		p.MaxWidth = ptr(v)
	}
	if p.MaxGen == nil && p.MaxWidth == nil {
		return nil
	}
	return &p
}

// readThermalLimits reads d's slowdown and memory-maximum thresholds.
func readThermalLimits(d nvml.Device) *Thermal {
	var th Thermal
	if v, ret := d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN); ret == nvml.SUCCESS && v > 0 {
		th.SlowdownC = ptr(v)
	}
	if v, ret := d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_MEM_MAX); ret == nvml.SUCCESS && v > 0 {
		th.MemLimitC = ptr(v)
	}
	return &th
}
