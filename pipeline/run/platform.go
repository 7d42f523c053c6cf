package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/envlist"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// executors are the step kinds this package runs, besides exec;
// registry configures reading a benchmark reference's published release.
func executors(registry []oci.Option) []engine.Option {
	return []engine.Option{
		engine.WithExecutor(pipeline.KindCUDABuild, &cuda.Build{}),
		engine.WithOutputChecker(cuda.Outputs{}),
		engine.WithExecutor(pipeline.KindTest, suite.Test{}),
		engine.WithExecutor(pipeline.KindBenchmark, suite.Benchmark{Releases: releaseFetcher{registry: registry}}),
		engine.WithExecutor(pipeline.KindBurnin, suite.Burnin{}),
		engine.WithExecutor(pipeline.KindProfile, suite.Profile{}),
	}
}

// uses says what a pipeline needs of the platform.
type uses struct {
	runners             map[string]bool
	gpuStep, cudaOnHost bool
}

func usesOf(p *pipeline.Pipeline) uses {
	u := uses{runners: map[string]bool{}}
	for _, s := range p.Steps {
		u.runners[s.Runner] = true
		u.gpuStep = u.gpuStep || s.GPU
		u.cudaOnHost = u.cudaOnHost || (s.Kind == pipeline.KindCUDABuild && s.Runner == "host")
	}
	return u
}

// runnerOptions starts the container runners the pipeline's steps use.
func runnerOptions(p *pipeline.Pipeline, u uses) ([]engine.Option, error) {
	var opts []engine.Option
	if u.runners["docker"] {
		d, err := runner.NewDocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, engine.WithRunner(d))
	}
	if u.runners["bwrap"] {
		b, err := runner.NewBwrap(runner.WithBwrapImageOptions(image.WithBaseDir(p.Dir)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, engine.WithRunner(b))
	}
	return opts, nil
}

// imageOptions pins the pipeline's images through its lock. Release
// pipelines (and locked runs) refuse floating tags and a missing or stale
// lock before any step runs.
func imageOptions(ctx context.Context, p *pipeline.Pipeline, locked bool) ([]engine.Option, error) {
	locked = locked || p.Release
	if len(p.Images) == 0 && !locked {
		return nil, nil
	}
	var opts []engine.Option
	lockFile := image.LockPath(p.Path)
	lock, err := image.ReadLock(lockFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		lock = nil
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	default:
		data, rerr := limits.ReadFile(lockFile, limits.LockBytes, "lock file")
		if rerr != nil {
			return nil, rerr
		}
		sum := sha256.Sum256(data)
		opts = append(opts, engine.WithLockDigest("sha256:"+hex.EncodeToString(sum[:])))
	}
	if locked && lock == nil && len(p.Images) > 0 {
		return nil, fmt.Errorf("%w: %s is a release pipeline but %s does not exist\nhint: run gpuattest lock %s and commit the lock file", ErrInvalid, p.Path, lockFile, p.Path)
	}
	pinOpts := []image.Option{image.WithBaseDir(p.Dir)}
	if locked {
		pinOpts = append(pinOpts, image.WithLocked())
	}
	pinner, err := image.NewPinner(ctx, p.Images, lock, pinOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return append(opts, engine.WithImageResolver(pinner.Pin)), nil
}

// hardwareOptions collects the hardware record (every run stores it) and
// wires GPU preflight and telemetry around gpu: true steps.
func hardwareOptions(ctx context.Context, src gpu.Source, base []string) ([]engine.Option, *hardware.Record, error) {
	rec, err := gpu.Collect(ctx, gpu.WithSource(src), gpu.WithVisibleDevices(envlist.Func(base)))
	if err != nil {
		return nil, nil, fmt.Errorf("collecting the hardware record: %w", err)
	}
	return []engine.Option{engine.WithHardware(rec), engine.WithGPUMonitor(gpuMonitor{gpu.NewMonitor(src, rec)})}, rec, nil
}

// gpuMonitor adapts gpu.Monitor to the engine's GPUMonitor interface.
type gpuMonitor struct{ m *gpu.Monitor }

var _ engine.GPUMonitor = gpuMonitor{}

func (g gpuMonitor) Preflight(ctx context.Context, p *pipeline.Pipeline, s *pipeline.Step, env []string, toolchain any) (any, error) {
	return g.m.Preflight(ctx, p, s, env, gpu.WithToolkit(gpu.ToolkitRelease(toolchain)))
}

func (g gpuMonitor) Watch(ctx context.Context, s *pipeline.Step, stepDir string, env []string) (engine.Watch, error) {
	w, err := g.m.Start(ctx, s, stepDir, env)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// toolchainOption fingerprints the host CUDA toolchain, for pipelines
// that build CUDA on the host.
func toolchainOption() engine.Option {
	return engine.WithToolchain(func(ctx context.Context) any {
		tc, err := cuda.Fingerprint(ctx, &runner.Host{})
		if err != nil {
			return map[string]string{"error": err.Error()}
		}
		return tc
	})
}
