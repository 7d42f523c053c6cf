package floors

// The published peaks (dense, no sparsity: the datasheets' FP16 Tensor
// Core figures marked with an asterisk are with sparsity, twice these)
// and where they were published.
var (
	a100Sheet = Source{Name: "NVIDIA A100 Tensor Core GPU datasheet",
		URL: "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"}
	h100Sheet = Source{Name: "NVIDIA H100 Tensor Core GPU datasheet",
		URL: "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"}
	h200Sheet = Source{Name: "NVIDIA H200 Tensor Core GPU specifications",
		URL: "https://www.nvidia.com/en-us/data-center/h200/"}
	b200Sheet = Source{Name: "NVIDIA HGX B200 specifications (per GPU: the 8-GPU board's figures over 8)",
		URL: "https://www.nvidia.com/en-us/data-center/hgx/"}
	// nvmlLimit is the power floor's "peak": the limit NVML enforces,
	// which the hardware record holds per GPU.
	nvmlLimit = Source{Name: "NVML's enforced power limit (nvmlDeviceGetEnforcedPowerLimit), per GPU in the hardware record",
		URL: "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html"}
)

// The bases of the floors, the same for every model unless it says.
const (
	powerBasis = "the burn-in's median power over its loop must reach 85 % of the enforced limit: a burn-in that leaves a GPU far below " +
		"its limit never provokes the power, VRM and cooling faults that appear at TDP (DCGM's targeted-power test passes at a peak of 75 %)"
	bandwidthBasis = "70 % of the peak: a grid-stride 16-byte copy reaches 85-92 % of it on a healthy GPU; a GPU below 70 % has a memory " +
		"fault, HBM at a low clock or a throttle (unmeasured on a GPU so far: docs/gpu-runs/ will refine it)"
	tensorBasisAmpere = "50 % of the dense peak: the tensor-core burn is mma.sync with an HBM stream and operand rotation beside it, at the " +
		"clocks the power limit leaves; a GPU at half clock falls below (unmeasured on a GPU so far)"
	tensorBasisHopper = "40 % of the dense peak: mma.sync (not wgmma, which nvcc 11.8 cannot build) reaches about two thirds of Hopper's " +
		"peak, less with the burn's HBM stream and at the clocks the power limit leaves; a GPU at half clock falls below (unmeasured on a GPU so far)"
	tensorBasisHopperPCIe = "35 % of the dense peak: as for the SXM boards, at the lower clocks a 350-600 W limit leaves (unmeasured on a GPU so far)"
	tensorBasisBlackwell  = "31 % of the dense peak: mma.sync is not Blackwell's full-rate path (tcgen05), and the burn runs from PTX (no sm_100 " +
		"cubin ships); the floor only catches a GPU far off (unmeasured on a GPU so far)"
)

func power() Floor[Share] {
	return Floor[Share]{Min: 0.85, Peak: 1, Source: nvmlLimit, Basis: powerBasis}
}

// table is every model with floors. Min is written out, not computed
// from Peak, so that the test that checks it against Peak means
// something.
var table = []Model{
	{
		Name:            "A100 SXM 40GB",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 1.089e12, Peak: 1.555e12, Source: a100Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 156e12, Peak: 312e12, Source: a100Sheet, Basis: tensorBasisAmpere},
	},
	{
		Name:            "A100 SXM 80GB",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 1.427e12, Peak: 2.039e12, Source: a100Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 156e12, Peak: 312e12, Source: a100Sheet, Basis: tensorBasisAmpere},
	},
	{
		Name:            "A100 PCIe 40GB",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 1.089e12, Peak: 1.555e12, Source: a100Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 156e12, Peak: 312e12, Source: a100Sheet, Basis: tensorBasisAmpere},
	},
	{
		Name:            "A100 PCIe 80GB",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 1.355e12, Peak: 1.935e12, Source: a100Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 156e12, Peak: 312e12, Source: a100Sheet, Basis: tensorBasisAmpere},
	},
	{
		Name:            "H100 SXM",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 2.345e12, Peak: 3.35e12, Source: h100Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 396e12, Peak: 989.4e12, Source: h100Sheet, Basis: tensorBasisHopper},
	},
	{
		Name:            "H100 PCIe",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 1.4e12, Peak: 2.0e12, Source: h100Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 265e12, Peak: 756e12, Source: h100Sheet, Basis: tensorBasisHopperPCIe},
	},
	{
		Name:            "H100 NVL",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 2.73e12, Peak: 3.9e12, Source: h100Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 292e12, Peak: 835.5e12, Source: h100Sheet, Basis: tensorBasisHopperPCIe},
	},
	{
		Name:            "H200 SXM",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 3.36e12, Peak: 4.8e12, Source: h200Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 396e12, Peak: 989.4e12, Source: h200Sheet, Basis: tensorBasisHopper},
	},
	{
		Name:            "H200 NVL",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 3.36e12, Peak: 4.8e12, Source: h200Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 292e12, Peak: 835.5e12, Source: h200Sheet, Basis: tensorBasisHopperPCIe},
	},
	{
		Name:            "B200",
		Power:           power(),
		MemoryBandwidth: Floor[BytesPerSecond]{Min: 5.6e12, Peak: 8e12, Source: b200Sheet, Basis: bandwidthBasis},
		TensorFP16:      Floor[FLOPS]{Min: 700e12, Peak: 2.25e15, Source: b200Sheet, Basis: tensorBasisBlackwell},
	},
}
