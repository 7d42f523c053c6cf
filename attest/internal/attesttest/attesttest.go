// Package attesttest holds fixtures for the attest packages' tests: a
// sample run on simulated hardware and helpers to sign it.
package attesttest

import (
	"github.com/gpuattest/gpuattest/attest/hardware"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
)

// Hardware returns a sealed hardware record of an H100 and an A100,
// simulated or claiming to be real.
func Hardware(simulated bool) *hardware.Record {
	mem, memA100 := uint64(85520809984), uint64(85899345920)
	rec := &hardware.Record{
		Simulated:         simulated,
		Host:              hardware.Host{CPUModel: "Test CPU", CPUCores: 16, MemoryBytes: 137438953472, Kernel: "6.1.0", OS: "Debian GNU/Linux 12 (bookworm)"},
		DriverVersion:     "550.54.15",
		CUDADriverVersion: "12.4",
		NVMLVersion:       "12.550.54.15",
		GPUs: []hardware.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-00000000-0000-0000-0000-000000000000",
			ComputeCapability: "9.0", MemoryTotalBytes: &mem},
			{Index: 1, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-11111111-1111-1111-1111-111111111111",
				ComputeCapability: "8.0", MemoryTotalBytes: &memA100}},
	}
	if err := rec.Seal(); err != nil {
		panic(err)
	}
	return rec
}

// Hex returns a 64-digit hex string of c, a fake sha256.
func Hex(c byte) string { return strings.Repeat(string(c), 64) }

// Run returns a passing run: its test ran on the A100 and its benchmark
// on the H100, both with backend cuda, covering its targets sm_80 and
// sm_90. When simulated is false the hardware record claims real
// hardware. Its one artifact is "build/kernels.fatbin" with digest
// artifactSHA256.
func Run(simulated bool, artifactSHA256 string) *attest.Run {
	yes := true
	hw := Hardware(simulated)
	dev := func(i int) []attest.Device {
		g := hw.GPUs[i]
		return []attest.Device{{UUID: g.UUID, Name: g.Name, ComputeCapability: g.ComputeCapability, Simulated: simulated}}
	}
	return &attest.Run{
		ID:             "run-1",
		PipelinePath:   "pipelines/release.yaml",
		PipelineDigest: "sha256:" + Hex('a'),
		LockDigest:     "sha256:" + Hex('b'),
		Steps: []attest.StepVerdict{
			{ID: "build", Kind: "cuda-build", Verdict: "passed", Runner: "docker"},
			{ID: "test", Kind: "test", Verdict: "passed", Runner: "docker", GPU: true, Backend: "cuda", Devices: dev(1),
				Cases: &attest.CaseCounts{Total: 4, Passed: 4}},
			{ID: "bench", Kind: "benchmark", Verdict: "passed", Runner: "docker", GPU: true, Backend: "cuda", Devices: dev(0),
				Cases: &attest.CaseCounts{Total: 1, Passed: 1}},
		},
		Hardware:  hw,
		Artifacts: []attest.FileDigest{{Path: "build/kernels.fatbin", SHA256: artifactSHA256, Step: "build", Kind: "fatbin"}},
		Results:   []attest.FileDigest{{Path: "steps/test/results.json", SHA256: Hex('d'), Step: "test", Kind: "results"}},
		Build: &attest.BuildFacts{
			Targets: []string{"sm_80", "sm_90"},
			Artifacts: []attest.BuildArtifact{{
				Step: "build", Path: "build/kernels.fatbin", SHA256: artifactSHA256,
				SASSArchs: []string{"sm_80", "sm_90"}, PTXArchs: []string{"compute_90"},
				Cubins: []attest.CubinDigest{{Arch: "sm_80", SHA256: Hex('e')}, {Arch: "sm_90", SHA256: Hex('f')}},
			}},
			Reproducible: &yes,
		},
		Benchmarks: []attest.BenchmarkSummary{{Step: "bench", Case: "vector_add", MedianNS: 1200, CILowNS: 1150, CIHighNS: 1260, Samples: 30, Throughput: &attest.Throughput{Value: 2950, Unit: "GB/s"}}},
		Images:     []attest.Image{{Name: "cuda", URI: "oci://nvcr.io/nvidia/cuda@sha256:" + Hex('1'), Digest: "sha256:" + Hex('1')}},
		Toolchain:  []attest.Tool{{Name: "nvcc", Version: "12.4.131"}},
		Byproducts: []attest.FileDigest{{Path: "steps/build/stdout.log", SHA256: Hex('2')}},
		StartedAt:  time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		FinishedAt: time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC),
		Version:    "v0.1.0",
	}
}
