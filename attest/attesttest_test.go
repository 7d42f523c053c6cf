package attest_test

import (
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
)

func hexOf(c byte) string { return strings.Repeat(string(c), 64) }

// sampleRun is a passing run on simulated hardware.
func sampleRun() *attest.Run {
	hw, err := os.ReadFile("testdata/hardware.json")
	if err != nil {
		panic(err)
	}
	yes := true
	return &attest.Run{
		ID:             "run-1",
		PipelinePath:   "pipelines/release.yaml",
		PipelineDigest: "sha256:" + hexOf('a'),
		LockDigest:     "sha256:" + hexOf('b'),
		Steps: []attest.StepRecord{
			{ID: "build", Kind: "cuda-build", Verdict: "passed", Runner: "docker"},
			{ID: "test", Kind: "test", Verdict: "passed", Runner: "docker"},
			{ID: "bench", Kind: "benchmark", Verdict: "passed", Runner: "docker"},
		},
		Hardware:  json.RawMessage(strings.TrimSpace(string(hw))),
		Artifacts: []attest.Artifact{{Path: "build/kernels.fatbin", SHA256: hexOf('c'), Step: "build", Kind: "fatbin"}},
		Results:   []attest.Artifact{{Path: "steps/test/results.json", SHA256: hexOf('d'), Step: "test", Kind: "results"}},
		Build: &attest.BuildFacts{
			Targets:      []string{"sm_80", "sm_90"},
			Artifacts:    []attest.BuildArtifact{{Step: "build", Path: "build/kernels.fatbin", SHA256: hexOf('c'), SASSArchs: []string{"sm_80", "sm_90"}, PTXArchs: []string{"compute_90"}, Cubins: []attest.CubinDigest{{Arch: "sm_80", SHA256: hexOf('e')}, {Arch: "sm_90", SHA256: hexOf('f')}}}},
			Reproducible: &yes,
		},
		Benchmarks: []attest.BenchmarkSummary{{Step: "bench", Case: "vector_add", MedianNS: 1200, CILowNS: 1150, CIHighNS: 1260, Samples: 30, Throughput: &attest.Throughput{Value: 2950, Unit: "GB/s"}}},
		Images:     []attest.Image{{Name: "cuda", Ref: "nvcr.io/nvidia/cuda@sha256:" + hexOf('1'), Digest: "sha256:" + hexOf('1')}},
		Toolchain:  []attest.Tool{{Name: "nvcc", Version: "12.4.131"}},
		Byproducts: []attest.Artifact{{Path: "steps/build/stdout.log", SHA256: hexOf('2')}},
		StartedAt:  time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		FinishedAt: time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC),
		Version:    "v0.1.0",
	}
}
