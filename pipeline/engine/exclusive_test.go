package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// simulatedRecord collects the hardware record of n simulated H100s.
func simulatedRecord(t *testing.T, spec string) *hardware.Record {
	t.Helper()
	rec, err := gpu.Collect(t.Context(), gpu.WithFakeGPU(spec))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func overlap(a, b *StepRecord) bool {
	return a.StartedAt.Before(*b.FinishedAt) && b.StartedAt.Before(*a.FinishedAt)
}

// TestExclusiveStepsNeverOverlap runs two gpu: true steps on the same
// (default: every) GPU, a CPU benchmark and a CPU burn-in side by side
// with a build step, four jobs at once: the four exclusive steps run one
// after the other (their run.json times never overlap) while the build
// step runs beside them.
func TestExclusiveStepsNeverOverlap(t *testing.T) {
	p := load(t, `steps:
  - {id: gpu-a, run: "sleep 0.3", gpu: true}
  - {id: gpu-b, run: "sleep 0.3", gpu: true}
  - {id: bench, kind: benchmark, run: "sleep 0.3", results: r.json}
  - {id: burn, kind: burnin, run: "sleep 0.3", results: b.json, duration: 1s}
  - {id: build, run: "sleep 0.6"}
`)
	res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithoutCache(), WithJobs(5),
		WithHardware(simulatedRecord(t, "h100:2")),
		WithExecutor(pipeline.KindBenchmark, Exec{}), WithExecutor(pipeline.KindBurnin, Exec{}))
	if err != nil || !res.Passed() {
		t.Fatalf("%v %+v", err, res.Record)
	}
	ex := []string{"gpu-a", "gpu-b", "bench", "burn"}
	for i, a := range ex {
		for _, b := range ex[i+1:] {
			if overlap(res.Record.Step(a), res.Record.Step(b)) {
				t.Errorf("%s and %s ran at the same time", a, b)
			}
		}
	}
	build, beside := res.Record.Step("build"), 0
	for _, a := range ex {
		if overlap(build, res.Record.Step(a)) {
			beside++
		}
	}
	if beside == 0 {
		t.Error("the build step never ran beside an exclusive step")
	}
}

// TestExclusivePerDevice runs two gpu: true steps on different GPUs
// (CUDA_VISIBLE_DEVICES by index and by UUID): they run at once; a third
// on the first GPU's UUID waits for the first.
func TestExclusivePerDevice(t *testing.T) {
	rec := simulatedRecord(t, "h100:2")
	p := load(t, `steps:
  - {id: gpu0, run: "sleep 0.4", gpu: true, env: {CUDA_VISIBLE_DEVICES: "0"}}
  - {id: gpu1, run: "sleep 0.4", gpu: true, env: {CUDA_VISIBLE_DEVICES: "`+rec.GPUs[1].UUID+`"}}
  - {id: gpu0-again, run: "sleep 0.1", gpu: true, env: {CUDA_VISIBLE_DEVICES: "`+rec.GPUs[0].UUID+`"}}
`)
	start := time.Now()
	res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithoutCache(), WithJobs(3), WithHardware(rec))
	if err != nil || !res.Passed() {
		t.Fatalf("%v %+v", err, res.Record)
	}
	if !overlap(res.Record.Step("gpu0"), res.Record.Step("gpu1")) {
		t.Errorf("steps on different GPUs did not run at once (%v in all)", time.Since(start))
	}
	if overlap(res.Record.Step("gpu0"), res.Record.Step("gpu0-again")) {
		t.Error("two steps on GPU 0 ran at the same time")
	}
}

// TestExpectGPUEnv: on a machine whose (real) record lists GPUs, steps
// get GPUATTEST_EXPECT_GPU, the count NVML opened, so the harness's
// --backend auto refuses a silent CPU run; a simulated record sets none.
func TestExpectGPUEnv(t *testing.T) {
	real := &hardware.Record{GPUs: []hardware.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-1"}, {Index: 1, Error: "opening GPU 1: GPU is lost (NVML 15)"}}}
	if err := real.Seal(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		rec  *hardware.Record
		want string
	}{
		{"real", real, "1"},
		{"simulated", simulatedRecord(t, "h100:2"), "unset"},
	} {
		p := load(t, `steps:
  - {id: s, run: 'echo "${GPUATTEST_EXPECT_GPU:-unset}" > seen'}
`)
		res, err := Run(t.Context(), p, WithOutDir(filepath.Join(t.TempDir(), "r")), WithoutCache(), WithHardware(tt.rec))
		if err != nil || !res.Passed() {
			t.Fatalf("%s: %v %+v", tt.name, err, res.Record)
		}
		b, _ := os.ReadFile(filepath.Join(p.Dir, "seen"))
		if got := strings.TrimSpace(string(b)); got != tt.want {
			t.Errorf("%s: GPUATTEST_EXPECT_GPU = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// passBuild stands in for cuda-build: it passes without running anything.
type passBuild struct{}

func (passBuild) Execute(context.Context, *step.Context) (*step.Outcome, error) {
	return &step.Outcome{Status: step.Passed}, nil
}

// TestResumeKeepsTheBuildToolchain: a run whose builds passed on one
// machine and whose other steps finish on another (--resume, as make
// gpu-check does) keeps the toolchain fingerprint of the machine that
// built; it is taken again only when a build step runs again.
func TestResumeKeepsTheBuildToolchain(t *testing.T) {
	p := load(t, `targets: [sm_90]
steps:
  - {id: build, kind: cuda-build, sources: [k.cu]}
  - {id: later, run: "test -e go-on", needs: [build]}
`)
	if err := os.WriteFile(filepath.Join(p.Dir, "k.cu"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	machine := "build machine"
	opts := func(more ...Option) []Option {
		return append([]Option{WithoutCache(), WithExecutor(pipeline.KindCUDABuild, passBuild{}),
			WithToolchain(func(context.Context) any { return machine })}, more...)
	}
	out := filepath.Join(t.TempDir(), "r")
	res, err := Run(t.Context(), p, opts(WithOutDir(out))...)
	if err != nil || res.Record.Step("later").State != runtypes.Failed {
		t.Fatalf("first attempt: %v %+v", err, res.Record)
	}
	machine = "gpu machine, no nvcc"
	os.WriteFile(filepath.Join(p.Dir, "go-on"), nil, 0o644)
	res, err = Run(t.Context(), p, opts(WithResume(out))...)
	if err != nil || !res.Passed() {
		t.Fatalf("resume: %v %+v", err, res.Record)
	}
	if res.Record.Toolchain != "build machine" {
		t.Errorf("toolchain = %v, want the build machine's", res.Record.Toolchain)
	}
}
