package floors

import (
	"fmt"
	"strings"
)

// Unit is a floor's unit: a float64 that names itself.
type Unit interface {
	~float64
	// Unit names the unit ("bytes/s").
	Unit() string
}

// Share is a fraction (0 to 1) of a GPU's enforced power limit, as NVML
// reports it.
type Share float64

// Unit returns "share of the enforced power limit".
func (Share) Unit() string { return "share of the enforced power limit" }

// String formats s as a percentage ("85 %").
func (s Share) String() string { return fmt.Sprintf("%.0f %%", 100*float64(s)) }

// BytesPerSecond is a memory bandwidth, in bytes per second (a copy's
// bytes read plus bytes written).
type BytesPerSecond float64

// Unit returns "bytes/s".
func (BytesPerSecond) Unit() string { return "bytes/s" }

// String formats b in GB/s ("2345 GB/s").
func (b BytesPerSecond) String() string { return fmt.Sprintf("%.0f GB/s", float64(b)/1e9) }

// FLOPS is a throughput in floating-point operations per second (a
// multiply-add counts two).
type FLOPS float64

// Unit returns "flop/s".
func (FLOPS) Unit() string { return "flop/s" }

// String formats f in TFLOP/s ("396 TFLOP/s").
func (f FLOPS) String() string { return fmt.Sprintf("%.0f TFLOP/s", float64(f)/1e12) }

// Source is where a peak was published.
type Source struct {
	// Name names the document ("NVIDIA H100 Tensor Core GPU datasheet").
	Name string
	// URL is where it is.
	URL string
}

// Floor is what a GPU must reach, in unit U, beside the peak of its
// model it is a share of and where that peak was published.
type Floor[U Unit] struct {
	// Min is the floor: a GPU below it fails.
	Min U
	// Peak is the model's published peak in the same unit.
	Peak U
	// Source is where Peak comes from.
	Source Source
	// Basis says why Min is the share of Peak it is.
	Basis string
}

// Set reports whether the floor is set (a zero Floor is "no floor").
func (f Floor[U]) Set() bool { return f.Min > 0 }

// Metric names what a floor bounds; it is the name the results and the
// predicate use.
type Metric string

// The metrics a model has floors for.
const (
	// MetricPower is the burn-in's median power over its loop, as a
	// share of the GPU's enforced power limit.
	MetricPower Metric = "power_share"
	// MetricMemoryBandwidth is the bandwidth case's median device-local
	// copy rate (the harness's --membw).
	MetricMemoryBandwidth Metric = "memory_bandwidth"
	// MetricTensorFP16 is the tensor-core burn's throughput (mma.sync,
	// fp16 inputs, fp32 accumulate), its flops over the device time its
	// launches took.
	MetricTensorFP16 Metric = "tensor_fp16"
)

// NotJudged is what a GPU whose model has no floor gets, in the details
// and the predicate.
const NotJudged = "no floor: not judged"

// Model is one GPU model's floors.
type Model struct {
	// Name is the model's name in the table ("H100 SXM").
	Name string
	// Power is the burn-in's median power over its loop.
	Power Floor[Share]
	// MemoryBandwidth is the bandwidth case's device-local copy rate.
	MemoryBandwidth Floor[BytesPerSecond]
	// TensorFP16 is the tensor-core burn's fp16 throughput.
	TensorFP16 Floor[FLOPS]
}

// matchers pick the table's model from an NVML name (lowercased); the
// first that matches wins, so more specific names come first.
var matchers = []struct {
	match func(n string) bool
	model string
}{
	{func(n string) bool { return has(n, "h200") && has(n, "nvl") }, "H200 NVL"},
	{func(n string) bool { return has(n, "h200") && !has(n, "gh200") }, "H200 SXM"},
	{func(n string) bool { return has(n, "h100") && has(n, "nvl") }, "H100 NVL"},
	{func(n string) bool { return has(n, "h100") && has(n, "pcie") }, "H100 PCIe"},
	{func(n string) bool { return has(n, "h100") }, "H100 SXM"},
	{func(n string) bool { return has(n, "a100") && has(n, "pcie") && has(n, "80gb") }, "A100 PCIe 80GB"},
	{func(n string) bool { return has(n, "a100") && has(n, "pcie") }, "A100 PCIe 40GB"},
	{func(n string) bool { return has(n, "a100") && has(n, "40gb") }, "A100 SXM 40GB"},
	{func(n string) bool { return has(n, "a100") && has(n, "80gb") }, "A100 SXM 80GB"},
	{func(n string) bool { return has(n, "b200") && !has(n, "gb200") }, "B200"},
}

func has(n, s string) bool { return strings.Contains(n, s) }

// Lookup returns the floors of the model a GPU of NVML name name (as the
// hardware record holds it, e.g. "NVIDIA H100 80GB HBM3") belongs to,
// and false when the table has no such model, or the name is a MIG
// instance's (a slice reaches a fraction of the GPU's floors).
func Lookup(name string) (Model, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" || migInstance(n) {
		return Model{}, false
	}
	for _, m := range matchers {
		if m.match(n) {
			for _, t := range table {
				if t.Name == m.model {
					return t, true
				}
			}
		}
	}
	return Model{}, false
}

// migInstance reports whether a lowercased device name is a MIG
// instance's ("nvidia a100-sxm4-40gb mig 1g.5gb").
func migInstance(n string) bool {
	f := strings.Fields(n)
	for i, w := range f {
		if w == "mig" && i+1 < len(f) && strings.Contains(f[i+1], "g.") {
			return true
		}
	}
	return false
}

// Models returns every model in the table, in table order.
func Models() []Model {
	return append([]Model(nil), table...)
}

// Check returns what is wrong with m's floors: a floor outside 30-95 %
// of its peak (a unit slip: typed in MB/s where the unit is bytes/s, or
// set to the peak itself), a missing peak or source. The table's test
// fails on any.
func Check(m Model) []string {
	var out []string
	out = append(out, check(m.Name, MetricPower, m.Power)...)
	out = append(out, check(m.Name, MetricMemoryBandwidth, m.MemoryBandwidth)...)
	out = append(out, check(m.Name, MetricTensorFP16, m.TensorFP16)...)
	return out
}

// MinShareOfPeak and MaxShareOfPeak bound a floor against its peak.
const (
	MinShareOfPeak = 0.30
	MaxShareOfPeak = 0.95
)

func check[U Unit](model string, metric Metric, f Floor[U]) []string {
	var out []string
	switch {
	case !f.Set():
		return []string{fmt.Sprintf("%s %s: no floor", model, metric)}
	case !(f.Peak > 0):
		return []string{fmt.Sprintf("%s %s: floor %v %s has no peak to be a share of", model, metric, float64(f.Min), f.Min.Unit())}
	}
	if share := float64(f.Min) / float64(f.Peak); share < MinShareOfPeak || share > MaxShareOfPeak {
		out = append(out, fmt.Sprintf("%s %s: floor %g %s is %.4g %% of the peak %g %s, outside %.0f-%.0f %%: a unit slip",
			model, metric, float64(f.Min), f.Min.Unit(), 100*share, float64(f.Peak), f.Peak.Unit(), 100*MinShareOfPeak, 100*MaxShareOfPeak))
	}
	if f.Source.Name == "" || !strings.HasPrefix(f.Source.URL, "https://") {
		out = append(out, fmt.Sprintf("%s %s: the peak's source %+v needs a name and an https URL", model, metric, f.Source))
	}
	if f.Basis == "" {
		out = append(out, fmt.Sprintf("%s %s: no basis for the floor", model, metric))
	}
	return out
}
