package run

import (
	"context"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// The calls below are the facade's for the CLI's other verbs (device,
// inspect, lock, compare, baseline save): each is one call into the
// package that does the work, and the types a front end renders are
// named here, so that a front end imports this package rather than the
// platform and step-kind packages.

// GPUSource is where the hardware record's GPUs come from (NVML or a
// simulated device).
type GPUSource = gpu.Source

// FakeGPUEnv is the environment variable that asks for simulated GPUs
// (h100, a100).
const FakeGPUEnv = gpu.FakeGPUEnv

// GPUSourceFor is the device source a process uses: the simulated GPUs
// fake names when it is not empty (FakeGPUEnv's value), else the real
// NVML, loaded from nvmlLibrary when that is not empty.
func GPUSourceFor(fake, nvmlLibrary string) (GPUSource, error) {
	if fake != "" {
		return gpu.SourceFromEnv(fake)
	}
	return gpu.NVML(nvmlLibrary), nil
}

// GPUUnsupported is nil when this build can read GPUs (linux with cgo:
// NVML); otherwise the error says why, naming the platform.
func GPUUnsupported() error { return gpu.Unsupported() }

// Hardware collects the hardware record of this machine from src, as a
// run records it.
func Hardware(ctx context.Context, src GPUSource) (*hardware.Record, error) {
	return gpu.Collect(ctx, gpu.WithSource(src))
}

// Inspect lists the SASS and PTX targets of the CUDA binary at path
// (cuobjdump on this host, run with env).
func Inspect(ctx context.Context, path string, env []string) (*runtypes.Inspection, error) {
	return cuda.Inspect(ctx, nil, path, cuda.WithEnv(env))
}

// CheckSASS compares the SASS architectures in in with targets, or
// returns nil when they are the same set.
func CheckSASS(in *runtypes.Inspection, targets []pipeline.Target) *cuda.ArchDiff {
	return cuda.CheckSASS(in, targets)
}

// Lock is a pipeline's gpuattest.lock; LockChange is one entry a lock
// run added, changed or removed (runtypes.LockProblem is one reason
// CheckLock refuses a release).
type (
	Lock       = image.Lock
	LockChange = image.Change
)

// DefaultPlatform is the platform images are locked for by default.
const DefaultPlatform = image.DefaultPlatform

// LockPath is the lock file of the pipeline at pipelinePath.
func LockPath(pipelinePath string) string { return image.LockPath(pipelinePath) }

// ReadLock reads the lock file at path.
func ReadLock(path string) (*Lock, error) { return image.ReadLock(path) }

// lockOptions are the image options of a lock run of p, read from
// pipelineFile, for platform.
func lockOptions(p *pipeline.Pipeline, pipelineFile, platform string) []image.Option {
	return []image.Option{image.WithBaseDir(p.Dir), image.WithPlatform(platform), image.WithPipelineFile(pipelineFile)}
}

// CheckLock is the release gate on p's images against lock (nil: none)
// for platform: every reason it refuses, none when it passes.
// pipelineFile names the pipeline in the hints.
func CheckLock(ctx context.Context, p *pipeline.Pipeline, lock *Lock, pipelineFile, platform string) []runtypes.LockProblem {
	return image.CheckLock(ctx, p.Images, lock, lockOptions(p, pipelineFile, platform)...)
}

// LockImages resolves p's images for platform into a lock, starting from
// existing (nil: none; update re-resolves its entries too), and says
// what changed.
func LockImages(ctx context.Context, p *pipeline.Pipeline, existing *Lock, update bool, pipelineFile, platform string) (*Lock, []LockChange, error) {
	return image.LockImages(ctx, p.Images, existing, update, lockOptions(p, pipelineFile, platform)...)
}

// Baseline is a benchmark baseline file; SampleSet is a set of benchmark
// samples read for a comparison; CompareReport is its outcome.
type (
	Baseline      = suite.Baseline
	SampleSet     = suite.SampleSet
	CompareReport = suite.Report
)

// SaveBaseline reads the samples of benchmark step stepID (empty: the
// run's only benchmark step) from the run directory runDir as a baseline.
func SaveBaseline(runDir, stepID string) (*Baseline, error) {
	return suite.SaveBaseline(runDir, stepID)
}

// LoadSampleSet reads a baseline or benchmark file; what names it in
// errors.
func LoadSampleSet(path, what string) (*SampleSet, error) { return suite.LoadSampleSet(path, what) }

// Compare compares candidate with baseline: a slowdown above threshold
// (a fraction) at significance level alpha is a regression; unless
// allowMismatch, sets from different hardware are refused.
func Compare(baseline, candidate *SampleSet, threshold, alpha float64, allowMismatch bool) (*CompareReport, error) {
	opts := []suite.CompareOption{suite.WithThreshold(threshold), suite.WithAlpha(alpha)}
	if allowMismatch {
		opts = append(opts, suite.AllowHardwareMismatch())
	}
	return suite.Compare(baseline, candidate, opts...)
}
