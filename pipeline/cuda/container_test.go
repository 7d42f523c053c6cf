package cuda_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/cudaimage"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// TestBuildInImage runs the cuda-build executor inside the CUDA test image
// (debootstrap'd Debian with the toolkit, pushed to a registry on
// 127.0.0.1 and pinned by digest) through the docker and bwrap runners:
// nvcc and cuobjdump run in the image, the reproducibility check rebuilds
// there, and every fatbin and cubin digest equals the host build's.
func TestBuildInImage(t *testing.T) {
	testenv.RequireTool(t, "nvcc")
	testenv.RequireTool(t, "cuobjdump")
	_, img := cudaimage.Ensure(t)
	ref, err := image.ParsePinned(cudaimage.Push(t, img, cudaimage.StartRegistry(t)))
	if err != nil {
		t.Fatal(err)
	}

	sources := []string{"vector_add.cu", "sgemm.cu"}
	build := func(t *testing.T, r runner.Runner, pinned image.Pinned) *cuda.BuildDetails {
		t.Helper()
		work := t.TempDir()
		copyDir(t, filepath.Join("..", "..", "kernels"), work)
		p := &pipeline.Pipeline{Name: "img", Targets: []string{"sm_80", "sm_90"}, Release: true, Steps: []pipeline.Step{{
			ID: "kernels", Kind: pipeline.KindCUDABuild, Sources: sources, Flags: []string{"-ccbin", "g++-11", "-O3"}, Reproducible: "check",
		}}}
		// An attempt to add sm_86 behind the pipeline's back: recorded,
		// cleared, and absent from the fatbins.
		sneak := "NVCC_APPEND_FLAGS=-gencode arch=compute_86,code=sm_86"
		env := []string{sneak}
		if pinned.IsZero() {
			env = append(os.Environ(), sneak)
		}
		sc := &step.Context{Pipeline: p, Step: &p.Steps[0], Runner: r, Image: pinned, WorkDir: work, StepDir: filepath.Join(t.TempDir(), "kernels"),
			Env: env, Stdout: io.Discard, Stderr: io.Discard, Logger: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
		defer cancel()
		// As the engine does on a cache miss: the key's facts, then the
		// build, on one executor. The image's nvcc variables are read by
		// one container, not one per question.
		cr := &countingRunner{Runner: r}
		sc.Runner = cr
		b := &cuda.Build{}
		if _, err := b.CacheKeyFacts(ctx, sc); err != nil {
			t.Fatalf("%s: cache key facts: %v", r.Name(), err)
		}
		out, err := b.Execute(ctx, sc)
		if err != nil {
			t.Fatalf("%s: %v", r.Name(), err)
		}
		if want := map[bool]int{true: 0, false: 1}[pinned.IsZero()]; cr.envProbes != want {
			t.Errorf("%s: the image's nvcc environment was read %d times, want %d", r.Name(), cr.envProbes, want)
		}
		det := out.Details.(*cuda.BuildDetails)
		if out.Status != step.Passed {
			t.Fatalf("%s: %s %s", r.Name(), out.Status, out.Reason)
		}
		if det.ClearedEnv["NVCC_APPEND_FLAGS"] != strings.TrimPrefix(sneak, "NVCC_APPEND_FLAGS=") {
			t.Errorf("%s: cleared env %v", r.Name(), det.ClearedEnv)
		}
		if det.Reproducibility == nil || !det.Reproducibility.Reproducible {
			t.Errorf("%s: reproducibility %+v", r.Name(), det.Reproducibility)
		}
		// The toolchain is fingerprinted where nvcc ran: in the image for
		// container runners.
		if tc := det.Toolchain; tc == nil || len(tc.NVCCSHA256) != 64 || len(tc.Tools) != len(cuda.DrivenTools) {
			t.Errorf("%s: toolchain fingerprint %+v, want nvcc and %v with digests", r.Name(), tc, cuda.DrivenTools)
		} else {
			for _, tf := range tc.Tools {
				if len(tf.SHA256) != 64 {
					t.Errorf("%s: %s has no digest: %+v", r.Name(), tf.Name, tf)
				}
			}
		}
		return det
	}
	digests := func(d *cuda.BuildDetails) string {
		var b strings.Builder
		for _, a := range d.Artifacts {
			b.WriteString(a.Path + " " + a.SHA256 + " " + strings.Join(a.SASS, ",") + " " + strings.Join(a.PTX, ",") + "\n")
			for _, c := range a.Cubins {
				b.WriteString("  " + c.Arch + " " + c.SHA256 + "\n")
			}
		}
		return b.String()
	}
	want := digests(build(t, &runner.Host{}, image.Pinned{}))

	t.Run("docker", func(t *testing.T) {
		testenv.RequireDocker(t)
		d, err := runner.NewDocker()
		if err != nil {
			t.Fatal(err)
		}
		if got := digests(build(t, d, ref)); got != want {
			t.Errorf("docker build differs from the host build:\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("bwrap", func(t *testing.T) {
		testenv.RequireTool(t, "bwrap")
		b, err := runner.NewBwrap(runner.WithBwrapCacheDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		if got := digests(build(t, b, ref)); got != want {
			t.Errorf("bwrap build differs from the host build:\n%s\nwant\n%s", got, want)
		}
	})
}

// countingRunner passes every command to Runner and counts the reads of
// an image's nvcc environment (sh probing NVCC_PREPEND_FLAGS).
type countingRunner struct {
	runner.Runner
	envProbes int
}

func (c *countingRunner) Run(ctx context.Context, cmd *runner.Command) (*runner.Result, error) {
	if len(cmd.Args) == 3 && cmd.Args[0] == "sh" && strings.Contains(cmd.Args[2], "NVCC_PREPEND_FLAGS+set") {
		c.envProbes++
	}
	return c.Runner.Run(ctx, cmd)
}
