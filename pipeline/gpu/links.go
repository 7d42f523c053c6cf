package gpu

import (
	"fmt"
	"slices"
	"strings"
)

// MinLoadedUtilization is the NVML GPU utilization (percent) from which
// a sample counts as under load: a GPU drops its PCIe link speed when
// idle, so the link generation is judged only on a GPU seen loaded.
const MinLoadedUtilization = 50

// PCIeLink is a GPU's PCIe link during a step: the most the GPU and the
// system support (NVML's max link generation and width) against the
// best the samples saw.
type PCIeLink struct {
	// MaxGen and MaxWidth are what the GPU and this system support.
	MaxGen   *int `json:"max_gen,omitempty"`
	MaxWidth *int `json:"max_width,omitempty"`
	// GenSeen and WidthSeen are the highest current values sampled.
	GenSeen   *int `json:"gen_seen,omitempty"`
	WidthSeen *int `json:"width_seen,omitempty"`
	// Loaded is whether a sample saw the GPU at least
	// MinLoadedUtilization % busy, so that the generation is judged.
	Loaded bool `json:"loaded"`
	// LoadUnknown is true when no sample reported the GPU's utilization:
	// its link generation is then not judged (an idle GPU lowers it), and
	// a generation below the maximum is noted.
	LoadUnknown bool `json:"load_unknown,omitempty"`
}

// NVLinks are a GPU's NVLinks before and after a step: how many were
// active and NVML's total CRC, replay and recovery error counters.
type NVLinks struct {
	// ActiveBefore and ActiveAfter list the active links.
	ActiveBefore []int `json:"active_before"`
	ActiveAfter  []int `json:"active_after"`
	// CRC, Replay and Recovery are the error totals over all links
	// (NVML field values *_ERROR_COUNT_TOTAL), before and after.
	CRCBefore      *uint64 `json:"crc_before,omitempty"`
	CRCAfter       *uint64 `json:"crc_after,omitempty"`
	ReplayBefore   *uint64 `json:"replay_before,omitempty"`
	ReplayAfter    *uint64 `json:"replay_after,omitempty"`
	RecoveryBefore *uint64 `json:"recovery_before,omitempty"`
	RecoveryAfter  *uint64 `json:"recovery_after,omitempty"`
}

// Thermal is a GPU's hottest readings in a step against its own limits
// (NVML's temperature thresholds).
type Thermal struct {
	// GPUMaxC is the hottest core temperature sampled; SlowdownC the
	// GPU's slowdown threshold.
	GPUMaxC   *uint32 `json:"gpu_max_c,omitempty"`
	SlowdownC *uint32 `json:"slowdown_c,omitempty"`
	// MemMaxC is the hottest HBM temperature sampled (NVML field
	// MEMORY_TEMP); MemLimitC the GPU's memory maximum.
	MemMaxC   *uint32 `json:"mem_max_c,omitempty"`
	MemLimitC *uint32 `json:"mem_limit_c,omitempty"`
}

// linkReasons fail a GPU whose PCIe link ran below what it and the system
// support (width always, generation when the GPU was seen loaded, since
// an idle GPU lowers its link speed), an NVLink that went down during
// the step or has fewer links active than the other watched GPUs with
// NVLink (most), and NVLink recovery errors during the step.
func linkReasons(h Health, most int) []string {
	var out []string
	if p := h.PCIe; p != nil {
		if p.MaxWidth != nil && p.WidthSeen != nil && *p.WidthSeen < *p.MaxWidth {
			out = append(out, fmt.Sprintf("gpu %d: PCIe link trained down to x%d (the GPU and system support x%d): the link runs at part of its bandwidth (hint: reseat the GPU or riser; nvidia-smi -q -d PCIE)", h.Index, *p.WidthSeen, *p.MaxWidth))
		}
		if p.Loaded && p.MaxGen != nil && p.GenSeen != nil && *p.GenSeen < *p.MaxGen {
			out = append(out, fmt.Sprintf("gpu %d: PCIe link at Gen%d under load (the GPU and system support Gen%d) (hint: check the slot, the riser and the BIOS link-speed setting; nvidia-smi -q -d PCIE)", h.Index, *p.GenSeen, *p.MaxGen))
		}
	}
	n := h.NVLink
	if n == nil {
		return out
	}
	var down []string
	for _, l := range n.ActiveBefore {
		if n.ActiveAfter != nil && !slices.Contains(n.ActiveAfter, l) {
			down = append(down, fmt.Sprint(l))
		}
	}
	if len(down) > 0 {
		out = append(out, fmt.Sprintf("gpu %d: NVLink(s) %s went down during the step (hint: nvidia-smi nvlink -s -i %d)", h.Index, strings.Join(down, ", "), h.Index))
	}
	if len(n.ActiveBefore) < most {
		out = append(out, fmt.Sprintf("gpu %d: %d NVLinks active, the other GPUs have %d (hint: nvidia-smi nvlink -s -i %d; a link that does not train needs service)", h.Index, len(n.ActiveBefore), most, h.Index))
	}
	if b, a := n.RecoveryBefore, n.RecoveryAfter; b != nil && a != nil && *a > *b {
		out = append(out, fmt.Sprintf("gpu %d: %d NVLink recovery error(s) during the step (%d -> %d): a link dropped and retrained (hint: nvidia-smi nvlink -e -i %d)", h.Index, *a-*b, *b, *a, h.Index))
	}
	return out
}

// thermalReasons fail a GPU whose core reached its slowdown threshold or
// whose HBM reached its memory maximum during the step.
func thermalReasons(h Health) []string {
	th := h.Thermal
	if th == nil {
		return nil
	}
	var out []string
	if th.GPUMaxC != nil && th.SlowdownC != nil && *th.GPUMaxC >= *th.SlowdownC {
		out = append(out, fmt.Sprintf("gpu %d: core temperature reached %d C, its slowdown threshold is %d C (hint: check airflow and the fans; nvidia-smi -q -d TEMPERATURE)", h.Index, *th.GPUMaxC, *th.SlowdownC))
	}
	if th.MemMaxC != nil && th.MemLimitC != nil && *th.MemMaxC >= *th.MemLimitC {
		out = append(out, fmt.Sprintf("gpu %d: HBM temperature reached %d C, its memory maximum is %d C (hint: check cooling; nvidia-smi -q -d TEMPERATURE)", h.Index, *th.MemMaxC, *th.MemLimitC))
	}
	return out
}

// healthNotes are what a step reports but does not fail on: corrected
// (single-bit) ECC errors and NVLink CRC and replay errors during it,
// which the hardware corrected.
func healthNotes(h Health) []string {
	var out []string
	out = append(out, correctedReasons(h)...)
	if p := h.PCIe; p != nil && p.LoadUnknown && p.MaxGen != nil && p.GenSeen != nil && *p.GenSeen < *p.MaxGen {
		out = append(out, fmt.Sprintf("gpu %d: PCIe link at Gen%d (the GPU and system support Gen%d), not judged: NVML reported no utilization, and an idle GPU lowers its link speed", h.Index, *p.GenSeen, *p.MaxGen))
	}
	if n := h.NVLink; n != nil {
		if b, a := n.CRCBefore, n.CRCAfter; b != nil && a != nil && *a > *b {
			out = append(out, fmt.Sprintf("gpu %d: %d NVLink CRC error(s) during the step (%d -> %d)", h.Index, *a-*b, *b, *a))
		}
		if b, a := n.ReplayBefore, n.ReplayAfter; b != nil && a != nil && *a > *b {
			out = append(out, fmt.Sprintf("gpu %d: %d NVLink replay(s) during the step (%d -> %d)", h.Index, *a-*b, *b, *a))
		}
	}
	return out
}

// correctedReasons are the memory errors ECC corrected during the step:
// a rise of the corrected (single-bit) ECC count, or of the rows remapped
// for correctable errors. A test or burn-in step fails on them
// (Summary.CorrectedErrorsFail); any other step notes them.
func correctedReasons(h Health) []string {
	var out []string
	if b, a := h.CorrectedBefore, h.CorrectedAfter; b != nil && a != nil && *a > *b {
		out = append(out, fmt.Sprintf("gpu %d: %d corrected ECC error(s) during the step (volatile count %d -> %d)", h.Index, *a-*b, *b, *a))
	}
	if b, a := h.RemappedCorrectableBefore, h.RemappedCorrectableAfter; b != nil && a != nil && *a > *b {
		out = append(out, fmt.Sprintf("gpu %d: %d row(s) remapped for correctable memory errors during the step (%d -> %d)", h.Index, *a-*b, *b, *a))
	}
	return out
}

// mostNVLinks is the most NVLinks active at start on any of gpus.
func mostNVLinks(gpus []Health) int {
	most := 0
	for _, h := range gpus {
		if h.NVLink != nil {
			most = max(most, len(h.NVLink.ActiveBefore))
		}
	}
	return most
}
