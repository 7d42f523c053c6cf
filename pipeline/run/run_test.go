package run_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// write puts a pipeline into a new directory and returns its path.
func write(t testing.TB, body string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: t\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func noGPU(t testing.TB) gpu.Source {
	return gpu.NVML(filepath.Join(t.TempDir(), "no-libnvidia-ml.so"))
}

func TestPipeline(t *testing.T) {
	t.Parallel()
	p, err := pipeline.Load(write(t, "steps:\n  - {id: a, run: echo hi}\n  - {id: b, run: 'exit 3', needs: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(),
		run.WithGPUSource(noGPU(t)), run.WithProgress(func(ev runtypes.Event) { events = append(events, ev.Type+":"+ev.Step) }))
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed() || res.Record.Step("a").State != runtypes.Passed || res.Record.Step("b").State != runtypes.Failed || res.Attestation != nil {
		t.Errorf("result %+v", res.Record)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "hardware.json")); err != nil {
		t.Errorf("no hardware record: %v", err)
	}
	if got := strings.Join(events, " "); !strings.Contains(got, "start:a") || !strings.Contains(got, "finish:b") {
		t.Errorf("progress events %s", got)
	}
}

func TestPipelineRefusesInvalidInput(t *testing.T) {
	t.Parallel()
	kp := func() *sign.Signer {
		priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		k, _ := sign.NewKeypair(priv)
		s, _ := sign.NewKeySigner(k)
		return s
	}()
	plain := write(t, "steps:\n  - {id: a, run: echo hi}\n")
	release := write(t, "release: true\nimages: {cuda: 'example.com/cuda:12'}\nsteps:\n  - {id: a, run: echo hi, runner: docker, image: cuda}\n")
	tests := []struct {
		name string
		file string
		opts func(dir string) []run.Option
		want string
	}{
		{"out and resume", plain, func(dir string) []run.Option { return []run.Option{run.WithOutDir(dir), run.WithResume(dir)} }, "both name a run directory"},
		{"release without a lock", release, func(string) []run.Option { return nil }, "is a release pipeline but"},
		{"key inside the root", plain, func(dir string) []run.Option {
			return []run.Option{run.WithSigner(kp, filepath.Join(filepath.Dir(plain), "release.key"))}
		}, "is inside the pipeline's root"},
		{"no jobs", plain, func(string) []run.Option { return []run.Option{run.WithJobs(0)} }, "jobs 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := pipeline.Load(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "r")
			_, err = run.Pipeline(t.Context(), p, append(tt.opts(dir), run.WithGPUSource(noGPU(t)), run.WithoutCache())...)
			if !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalid with %q", err, tt.want)
			}
			if _, serr := os.Stat(dir); serr == nil {
				t.Errorf("a run directory was written for invalid input")
			}
		})
	}
}

// Run a pipeline into a run directory and read how it went.
func ExamplePipeline() {
	dir, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "hello.yaml")
	_ = os.WriteFile(file, []byte("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: hello\nsteps:\n  - {id: greet, run: echo hello}\n"), 0o644)
	p, err := pipeline.Load(file)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := run.Pipeline(context.Background(), p, run.WithOutDir(filepath.Join(dir, "run")), run.WithoutCache(),
		run.WithGPUSource(gpu.NVML(filepath.Join(dir, "no-nvml.so"))))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Record.State, res.Record.Step("greet").State)
	// Output: passed passed
}

// TestUnopenableGPU: one GPU NVML cannot open no longer aborts the run.
// The record keeps it with its error; a CPU step runs; a gpu: true step
// that sees only the healthy GPU passes preflight; one that sees every
// GPU fails preflight naming the broken one.
func TestUnopenableGPU(t *testing.T) {
	t.Parallel()
	src, err := gpu.Simulate("h100:2")
	if err != nil {
		t.Fatal(err)
	}
	src.SetOpenError(1, nvml.ERROR_GPU_IS_LOST)
	p, err := pipeline.Load(write(t, `steps:
  - {id: cpu, run: "true"}
  - {id: gpu0, run: "true", gpu: true, env: {CUDA_VISIBLE_DEVICES: "0"}}
  - {id: every-gpu, run: "true", gpu: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(),
		run.WithGPUSource(src), run.WithBaseEnv([]string{"PATH=" + os.Getenv("PATH")}))
	if err != nil {
		t.Fatalf("the run was aborted: %v", err)
	}
	rec := res.Record
	if rec.Step("cpu").State != runtypes.Passed || rec.Step("gpu0").State != runtypes.Passed {
		t.Errorf("cpu %s %q, gpu0 %s %q: want both passed", rec.Step("cpu").State, rec.Step("cpu").Reason, rec.Step("gpu0").State, rec.Step("gpu0").Reason)
	}
	if s := rec.Step("every-gpu"); s.State != runtypes.Failed || !strings.Contains(s.Reason, "preflight: gpu: gpu 1: NVML cannot open the GPU this step sees: opening GPU 1: GPU is lost (NVML 15)") {
		t.Errorf("every-gpu: %s %q, want a preflight failure naming GPU 1", s.State, s.Reason)
	}
	hw, err := os.ReadFile(filepath.Join(res.Dir, "hardware.json"))
	if err != nil || !strings.Contains(string(hw), `"error":"opening GPU 1: GPU is lost (NVML 15)`) {
		t.Errorf("hardware.json lacks GPU 1's error: %v %s", err, hw)
	}
}
