package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/suite"
	"github.com/spf13/cobra"
)

// platformOptions wires what this binary provides into the engine: the
// executors of every step kind, the container runners, image pinning with
// the lock, the hardware record with preflight and telemetry, and the host
// toolchain fingerprint.
func platformOptions(c *cobra.Command, p *pipeline.Pipeline, f *runFlags) ([]engine.Option, error) {
	ctx := c.Context()
	opts := []engine.Option{
		engine.WithExecutor(pipeline.KindCUDABuild, &cuda.Build{}),
		engine.WithExecutor(pipeline.KindTest, suite.Test{}),
		engine.WithExecutor(pipeline.KindBenchmark, suite.Benchmark{}),
		engine.WithExecutor(pipeline.KindBurnin, suite.Burnin{}),
		engine.WithExecutor(pipeline.KindProfile, suite.Profile{}),
	}

	uses := map[string]bool{}
	hasGPUStep, hasCUDABuild := false, false
	for _, s := range p.Steps {
		uses[s.Runner] = true
		hasGPUStep = hasGPUStep || s.GPU
		hasCUDABuild = hasCUDABuild || s.Kind == pipeline.KindCUDABuild
	}
	if uses["docker"] {
		d, err := runner.NewDocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, engine.WithRunner(d))
	}
	if uses["bwrap"] {
		b, err := runner.NewBwrap(runner.WithBwrapImageOptions(image.WithBaseDir(p.Dir)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, engine.WithRunner(b))
	}

	// Images: pinned through the lock; release pipelines (or --locked)
	// refuse floating tags and a missing or stale lock before any step runs.
	locked := p.Release || f.locked
	if len(p.Images) > 0 || locked {
		lockFile := image.LockPath(p.Path)
		lock, err := image.ReadLock(lockFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			lock = nil
		case err != nil:
			return nil, withCode(exitUsage, err)
		default:
			data, rerr := os.ReadFile(lockFile)
			if rerr != nil {
				return nil, rerr
			}
			sum := sha256.Sum256(data)
			opts = append(opts, engine.WithLockDigest("sha256:"+hex.EncodeToString(sum[:])))
		}
		if locked && lock == nil && len(p.Images) > 0 {
			return nil, withCode(exitUsage, fmt.Errorf("%s is a release pipeline but %s does not exist\nhint: run gpuattest lock %s and commit the lock file", p.Path, lockFile, p.Path))
		}
		pinOpts := []image.Option{image.WithBaseDir(p.Dir)}
		if locked {
			pinOpts = append(pinOpts, image.WithLocked())
		}
		pinner, err := image.NewPinner(ctx, p.Images, lock, pinOpts...)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		opts = append(opts, engine.WithImageResolver(pinner.Pin))
	}

	// Hardware record (every run stores it), preflight and telemetry.
	hw, rec, err := hardwareOptions(ctx)
	if err != nil {
		return nil, err
	}
	opts = append(opts, hw...)
	if hasGPUStep && len(rec.GPUs) == 0 {
		fmt.Fprintf(c.ErrOrStderr(), "warning: the pipeline has gpu: true steps but no GPU is available (%s); they will fail preflight\n", rec.Reason)
	}
	if rec.Simulated {
		fmt.Fprintln(c.ErrOrStderr(), "warning: SIMULATED GPU (GPUATTEST_FAKE_GPU); results and attestations say so and default policies reject them")
	}

	// The host toolchain, when the pipeline builds CUDA on the host.
	if hasCUDABuild && uses["host"] {
		opts = append(opts, engine.WithToolchain(func(ctx context.Context) any {
			tc, err := cuda.Fingerprint(ctx, &runner.Host{})
			if err != nil {
				return map[string]string{"error": err.Error()}
			}
			return tc
		}))
	}
	return opts, nil
}
