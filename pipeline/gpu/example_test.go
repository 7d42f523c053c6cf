//go:build linux && cgo

package gpu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
)

// Collect reads the hardware record; here from one simulated H100.
func ExampleCollect() {
	rec, err := gpu.Collect(context.Background(), gpu.WithFakeGPU("h100"))
	if err != nil {
		fmt.Println(err)
		return
	}
	g := rec.GPUs[0]
	fmt.Println(rec.Simulated, g.Name, g.ComputeCapability, *g.PowerLimitWatts)
	// Output: true NVIDIA H100 80GB HBM3 9.0 700
}

// Preflight checks a record and a live probe against a pipeline's
// preflight block and the code its builds embed.
func ExamplePreflight() {
	src, _ := gpu.Simulate("a100")
	rec, _ := gpu.Collect(context.Background(), gpu.WithSource(src))
	live, _ := gpu.Probe(context.Background(), src)
	yes := true
	checks, err := gpu.Preflight(rec, &pipeline.Preflight{RequireECC: &yes}, gpu.BuildCode([]string{"sm_80", "sm_90"}, true), pipeline.MustSize("16GiB"), live)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range checks {
		fmt.Println(c.Status, c.Message)
	}
	// Output:
	// warned gpu: devices are simulated (GPUATTEST_FAKE_GPU): results say nothing about real hardware [simulated]
	// passed compute-capability: gpu 0 (Mock NVIDIA A100-SXM4-40GB): sm_80 SASS on cc 8.0 [simulated]
	// passed ecc: gpu 0 (Mock NVIDIA A100-SXM4-40GB): seen enabled, required enabled [simulated]
	// passed row-remap: gpu 0 (Mock NVIDIA A100-SXM4-40GB): seen no failure, required no failure [simulated]
	// passed mig: gpu 0 (Mock NVIDIA A100-SXM4-40GB): seen disabled, required disabled [simulated]
	// passed floors: gpu 0 (Mock NVIDIA A100-SXM4-40GB): floors of A100 SXM 40GB: power 85 % of the limit, memory bandwidth 1089 GB/s, tensor fp16 156 TFLOP/s [simulated]
	// passed processes: gpu 0 (Mock NVIDIA A100-SXM4-40GB): seen none, required none [simulated]
	// passed memory: gpu 0 (Mock NVIDIA A100-SXM4-40GB): seen 39.99 GiB free, required >= 16 GiB free [simulated]
}

// StartTelemetry samples around a step; a fatal Xid fails the verdict.
func ExampleStartTelemetry() {
	src, _ := gpu.Simulate("h100")
	dir, _ := os.MkdirTemp("", "telemetry")
	defer os.RemoveAll(dir)
	t, err := gpu.StartTelemetry(context.Background(), src, filepath.Join(dir, gpu.TelemetryFile), 10*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	src.InjectXid(0, 79) // the driver reports the GPU fell off the bus
	sum, _ := t.Stop()
	fmt.Println(sum.Verdict.Status, sum.Verdict.Reasons)
	// Output: failed [gpu 0: fatal Xid 79 (GPU has fallen off the bus)]
}
