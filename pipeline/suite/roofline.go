package suite

import (
	"fmt"
	"strings"
)

// Peak holds a GPU model's dense (no sparsity) peak throughput.
type Peak struct {
	// Model is the model's name in this table.
	Model string `json:"model"`
	// FP32, TF32, BF16 and FP16 are peak FLOP/s (tensor cores for TF32,
	// BF16 and FP16).
	FP32 float64 `json:"fp32_flops"`
	TF32 float64 `json:"tf32_flops"`
	BF16 float64 `json:"bf16_flops"`
	FP16 float64 `json:"fp16_flops"`
	// MemBW is the peak memory bandwidth in bytes/s.
	MemBW float64 `json:"mem_bytes_per_s"`
}

// peaks are vendor datasheet figures (dense). Order matters: the first
// entry whose match returns true wins.
var peaks = []struct {
	match func(n string) bool
	peak  Peak
}{
	// GH200 (Grace Hopper: "NVIDIA GH200 480GB", an H100-class GPU with
	// 96 GB HBM3, or 144 GB HBM3e) before H200, whose name it contains.
	{func(n string) bool { return strings.Contains(n, "gh200") && strings.Contains(n, "144g") },
		Peak{"GH200 144GB HBM3e", 67e12, 494.7e12, 989.4e12, 989.4e12, 4.9e12}},
	{func(n string) bool { return strings.Contains(n, "gh200") },
		Peak{"GH200 96GB HBM3", 67e12, 494.7e12, 989.4e12, 989.4e12, 4.0e12}},
	{func(n string) bool { return strings.Contains(n, "h200") && strings.Contains(n, "nvl") },
		Peak{"H200 NVL", 60e12, 417.5e12, 835.5e12, 835.5e12, 4.8e12}},
	{func(n string) bool { return strings.Contains(n, "h200") },
		Peak{"H200 SXM", 67e12, 494.7e12, 989.4e12, 989.4e12, 4.8e12}},
	// H800: the H100 for export markets, same compute and memory (its
	// NVLink is narrower, which these peaks do not include).
	{func(n string) bool { return strings.Contains(n, "h800") && strings.Contains(n, "pcie") },
		Peak{"H800 PCIe", 51.2e12, 378e12, 756e12, 756e12, 2.0e12}},
	{func(n string) bool { return strings.Contains(n, "h800") },
		Peak{"H800 SXM", 67e12, 494.7e12, 989.4e12, 989.4e12, 3.35e12}},
	{func(n string) bool { return strings.Contains(n, "h100") && strings.Contains(n, "nvl") },
		Peak{"H100 NVL", 60e12, 417.5e12, 835.5e12, 835.5e12, 3.9e12}},
	{func(n string) bool { return strings.Contains(n, "h100") && strings.Contains(n, "pcie") },
		Peak{"H100 PCIe", 51.2e12, 378e12, 756e12, 756e12, 2.0e12}},
	{func(n string) bool { return strings.Contains(n, "h100") },
		Peak{"H100 SXM", 67e12, 494.7e12, 989.4e12, 989.4e12, 3.35e12}},
	{func(n string) bool {
		return strings.Contains(n, "a100") && strings.Contains(n, "pcie") && strings.Contains(n, "80gb")
	}, Peak{"A100 PCIe 80GB", 19.5e12, 156e12, 312e12, 312e12, 1.935e12}},
	{func(n string) bool { return strings.Contains(n, "a100") && strings.Contains(n, "pcie") },
		Peak{"A100 PCIe 40GB", 19.5e12, 156e12, 312e12, 312e12, 1.555e12}},
	{func(n string) bool { return strings.Contains(n, "a100") && strings.Contains(n, "40gb") },
		Peak{"A100 SXM 40GB", 19.5e12, 156e12, 312e12, 312e12, 1.555e12}},
	{func(n string) bool { return strings.Contains(n, "a100") },
		Peak{"A100 SXM 80GB", 19.5e12, 156e12, 312e12, 312e12, 2.039e12}},
	// B200 (HGX B200, per GPU: the 8-GPU board's figures over 8); GB200
	// is a different board.
	{func(n string) bool { return strings.Contains(n, "b200") && !strings.Contains(n, "gb200") },
		Peak{"B200", 75e12, 1.125e15, 2.25e15, 2.25e15, 8e12}},
	{func(n string) bool { return strings.Contains(n, "l40s") },
		Peak{"L40S", 91.6e12, 183e12, 362.05e12, 362.05e12, 864e9}},
	{func(n string) bool { return n == "nvidia l4" || n == "l4" || strings.HasSuffix(n, " l4") },
		Peak{"L4", 30.3e12, 60e12, 121e12, 121e12, 300e9}},
}

// LookupPeak returns the peak table entry for a GPU model name as NVML
// reports it (e.g. "NVIDIA H100 80GB HBM3"), and false when the model is
// not in the table or names a MIG instance (see MIGInstance): a slice's
// peaks are a fraction of the GPU's, and the table has only whole GPUs.
func LookupPeak(model string) (Peak, bool) {
	n := strings.ToLower(strings.TrimSpace(model))
	if n == "" || MIGInstance(model) {
		return Peak{}, false
	}
	for _, p := range peaks {
		if p.match(n) {
			return p.peak, true
		}
	}
	return Peak{}, false
}

// MIGInstance reports whether a device name is a MIG instance's, as the
// CUDA driver names them ("NVIDIA A100-SXM4-40GB MIG 1g.5gb").
func MIGInstance(model string) bool {
	f := strings.Fields(strings.ToLower(model))
	for i, w := range f {
		if w == "mig" && i+1 < len(f) && strings.Contains(f[i+1], "g.") {
			return true
		}
	}
	return false
}

// Roofline places a case on its GPU's roofline.
type Roofline struct {
	// ArithmeticIntensity is flops per byte moved; zero when either is unknown.
	ArithmeticIntensity float64 `json:"arithmetic_intensity,omitempty"`
	// Precision is the peak column used: fp32, tf32, bf16 or fp16.
	Precision string `json:"precision,omitempty"`
	// Model is the peak table's model; empty when there is none.
	Model string `json:"model,omitempty"`
	// PeakFLOPS and PeakBytesPerS are the model's peaks at Precision.
	PeakFLOPS     float64 `json:"peak_flops,omitempty"`
	PeakBytesPerS float64 `json:"peak_bytes_per_s,omitempty"`
	// Bound is memory or compute: which roof limits this intensity.
	Bound string `json:"bound,omitempty"`
	// Attained is the achieved fraction of the roof that bounds the case
	// (achieved FLOP/s over min(peak, AI × bandwidth), or achieved
	// bandwidth over peak bandwidth for a kernel without flops).
	Attained *float64 `json:"attained_fraction,omitempty"`
	// Note says why figures are missing (cpu backend, unknown model).
	Note string `json:"note,omitempty"`
}

// roofline computes c's roofline position from the median time.
func roofline(backend, model string, simulated bool, flops, bytes, medianNS float64, config map[string]string) *Roofline {
	r := &Roofline{}
	if flops > 0 && bytes > 0 {
		r.ArithmeticIntensity = flops / bytes
	}
	if backend != "cuda" {
		r.Note = fmt.Sprintf("%s backend: no GPU roofline", orUnknown(backend))
		return r
	}
	p, ok := LookupPeak(model)
	if !ok && MIGInstance(model) {
		r.Note = fmt.Sprintf("%q is a MIG instance: the peak table holds whole GPUs, so no attained fraction", model)
		return r
	}
	if !ok {
		r.Note = fmt.Sprintf("GPU model %q is not in the peak table: no attained fraction", model)
		return r
	}
	if flops == 0 && bytes == 0 {
		r.Note = "the case reports neither flops nor bytes"
		return r
	}
	prec := strings.ToLower(config["dtype"])
	if prec == "" {
		prec = strings.ToLower(config["precision"])
	}
	peakF := p.FP32
	switch prec {
	case "tf32":
		peakF = p.TF32
	case "bf16":
		peakF = p.BF16
	case "fp16", "half":
		peakF = p.FP16
	default:
		prec = "fp32"
	}
	r.Model, r.Precision, r.PeakFLOPS, r.PeakBytesPerS = p.Model, prec, peakF, p.MemBW
	if simulated {
		r.Note = "simulated GPU: the peak is the model's, the timing is not"
	}
	if medianNS <= 0 {
		return r
	}
	sec := medianNS / 1e9
	var frac float64
	if flops == 0 {
		r.Bound = "memory"
		frac = bytes / sec / p.MemBW
	} else {
		ridge := peakF / p.MemBW
		ai := r.ArithmeticIntensity
		roof := peakF
		r.Bound = "compute"
		if bytes > 0 && ai < ridge {
			r.Bound = "memory"
			roof = ai * p.MemBW
		}
		frac = flops / sec / roof
	}
	r.Attained = &frac
	return r
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
