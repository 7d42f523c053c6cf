// Package attesttest holds fixtures for the attest packages' tests: a
// sample run on simulated hardware and helpers to sign it.
package attesttest

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
)

// SimulatedHardware is a hardware record of a simulated H100, shaped like
// pipeline/gpu's record.
const SimulatedHardware = `{"simulated":true,"host":{"cpu":"Simulated CPU","cores":16,"memory_bytes":137438953472,"kernel":"6.1.0","os":"Debian 12"},"driver_version":"550.54.15","cuda_driver_version":"12.4","nvml_version":"12.550.54.15","gpus":[{"index":0,"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-00000000-0000-0000-0000-000000000000","compute_capability":"9.0","memory_bytes":85520809984}],"digest":"sha256:7d2f8a5e0c1b3a4d6e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d"}`

// Hex returns a 64-digit hex string of c, a fake sha256.
func Hex(c byte) string { return strings.Repeat(string(c), 64) }

// Run returns a passing run. When simulated is false the hardware record
// claims real hardware. Its one artifact is "build/kernels.fatbin" with
// digest artifactSHA256.
func Run(simulated bool, artifactSHA256 string) *attest.Run {
	hw := SimulatedHardware
	if !simulated {
		hw = strings.Replace(hw, `"simulated":true`, `"simulated":false`, 1)
	}
	yes := true
	return &attest.Run{
		ID:             "run-1",
		PipelinePath:   "pipelines/release.yaml",
		PipelineDigest: "sha256:" + Hex('a'),
		LockDigest:     "sha256:" + Hex('b'),
		Steps: []attest.StepRecord{
			{ID: "build", Kind: "cuda-build", Verdict: "passed", Runner: "docker"},
			{ID: "test", Kind: "test", Verdict: "passed", Runner: "docker"},
			{ID: "bench", Kind: "benchmark", Verdict: "passed", Runner: "docker"},
		},
		Hardware:  json.RawMessage(hw),
		Artifacts: []attest.Artifact{{Path: "build/kernels.fatbin", SHA256: artifactSHA256, Step: "build", Kind: "fatbin"}},
		Results:   []attest.Artifact{{Path: "steps/test/results.json", SHA256: Hex('d'), Step: "test", Kind: "results"}},
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
		Byproducts: []attest.Artifact{{Path: "steps/build/stdout.log", SHA256: Hex('2')}},
		StartedAt:  time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		FinishedAt: time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC),
		Version:    "v0.1.0",
	}
}
