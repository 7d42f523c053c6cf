package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/source"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Option configures Run.
type Option func(*options) error

type options struct {
	outDir     string
	resume     string
	jobs       int
	cacheDir   string
	noCache    bool
	logger     *slog.Logger
	progress   func(runtypes.Event)
	version    string
	executors  map[string]step.Executor
	runners    map[string]runner.Runner
	images     ImageResolver
	hardware   *hardware.Record
	monitor    GPUMonitor
	evidence   EvidenceCollector
	lockDigest string
	toolchain  func(ctx context.Context) any
	source     *source.Info
	baseEnv    []string
	checkCache func(*StepRecord) error
	outputs    step.OutputChecker
	now        func() time.Time
}

// ImageResolver pins a pipeline image (name and reference as written) to
// its digests, enforcing the lock in release mode (image.Pinner.Pin).
type ImageResolver func(ctx context.Context, name, ref string) (image.Pinned, error)

// GPUMonitor runs preflight checks before, and telemetry around, every
// gpu: true step. The engine calls it; pipeline/gpu implements it.
type GPUMonitor interface {
	// Preflight checks the hardware for step s, whose environment is env
	// (its CUDA_VISIBLE_DEVICES says which GPUs it sees). A non-nil error
	// fails the step with the error's text (it names the check, the value
	// seen and the value required). The returned report is stored in
	// run.json. toolchain is the run record's toolchain fingerprint (the
	// CUDA toolkit the builds used; nil when none was recorded), so that
	// a driver too old to JIT the build's PTX is refused.
	Preflight(ctx context.Context, p *pipeline.Pipeline, s *pipeline.Step, env []string, toolchain any) (report any, err error)
	// Watch starts telemetry for step s, whose environment is env,
	// writing into stepDir.
	Watch(ctx context.Context, s *pipeline.Step, stepDir string, env []string) (Watch, error)
}

// Watch is telemetry running around one step.
type Watch interface {
	// Stop ends sampling and returns a summary for run.json and, when the
	// hardware misbehaved (new double-bit ECC error, fatal Xid, row-remap
	// failure, lost GPU), the reason the step must fail whatever its
	// results say. device is the UUID of the GPU the step's results say
	// it ran on (step.Outcome.DeviceUUID), "" when they name none: only
	// that GPU is judged when it was watched.
	Stop(device string) (summary any, failure string, err error)
}

// WithOutDir sets the run directory (default .gpuattest/runs/<time>-<name>).
func WithOutDir(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return errors.New("output directory is empty")
		}
		o.outDir = dir
		return nil
	}
}

// WithResume continues the run in dir: steps that passed and whose outputs
// are unchanged are kept; the rest run again.
func WithResume(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return errors.New("resume directory is empty")
		}
		o.resume = dir
		return nil
	}
}

// WithJobs bounds how many steps run at once (default: the number of CPUs).
func WithJobs(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("jobs %d: expected 1 or more", n)
		}
		o.jobs = n
		return nil
	}
}

// WithCacheDir sets the build cache directory (default
// image.DefaultCacheDir(), $XDG_CACHE_HOME/gpuattest; when that cannot be
// found, the run goes without a cache and logs why).
func WithCacheDir(dir string) Option {
	return func(o *options) error { o.cacheDir = dir; return nil }
}

// WithoutCache disables the build cache for this run.
func WithoutCache() Option {
	return func(o *options) error { o.noCache = true; return nil }
}

// WithLogger sets the diagnostics logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		o.logger = l
		return nil
	}
}

// WithProgress receives an event as each step starts and ends, and as a
// running step reports progress (preflight, a burn-in's iterations, a
// benchmark's samples). It is called from the engine's goroutines, one
// call at a time, and must return quickly.
func WithProgress(f func(runtypes.Event)) Option {
	return func(o *options) error { o.progress = f; return nil }
}

// WithVersion sets the gpuattest version recorded and keyed into the cache.
func WithVersion(v string) Option {
	return func(o *options) error { o.version = v; return nil }
}

// WithCacheCheck has every build-cache hit checked by f before it is used:
// f gets the step's record as the entry would restore it (details,
// results, artifacts) and returns an error when it cannot read it, e.g.
// details written by another gpuattest build sharing the cache. Such an
// entry is a miss, noted in the step record, and the step runs and stores
// a fresh entry. pipeline/run passes rundir's strict decoder.
func WithCacheCheck(f func(*StepRecord) error) Option {
	return func(o *options) error { o.checkCache = f; return nil }
}

// WithOutputChecker has c check the outputs of every exec step that
// passed and declared outputs, before they are cached and recorded: its
// artifacts become the step's (released) artifacts, its details the
// step's "outputs", and any problem it reports fails the step.
// pipeline/run passes cuda.Outputs, which checks their device code.
func WithOutputChecker(c step.OutputChecker) Option {
	return func(o *options) error { o.outputs = c; return nil }
}

// WithExecutor runs steps of kind with e (exec is built in).
func WithExecutor(kind string, e step.Executor) Option {
	return func(o *options) error { o.executors[kind] = e; return nil }
}

// WithRunner makes r available under r.Name() (host is built in).
func WithRunner(r runner.Runner) Option {
	return func(o *options) error { o.runners[r.Name()] = r; return nil }
}

// WithImageResolver pins images for container runners.
func WithImageResolver(f ImageResolver) Option {
	return func(o *options) error { o.images = f; return nil }
}

// WithHardware records the hardware record as hardware.json and passes
// it to executors. The record's digest must match its content.
func WithHardware(rec *hardware.Record) Option {
	return func(o *options) error {
		if rec == nil {
			return errors.New("nil hardware record")
		}
		if err := rec.Verify(); err != nil {
			return err
		}
		o.hardware = rec
		return nil
	}
}

// WithGPUMonitor runs preflight and telemetry around gpu: true steps.
func WithGPUMonitor(m GPUMonitor) Option {
	return func(o *options) error { o.monitor = m; return nil }
}

// EvidenceCollector asks the GPUs to sign a nonce bound to the run, once
// per attempt: before the first gpu: true step, or, in a run without one,
// after the last step. pipeline/run implements it.
type EvidenceCollector interface {
	// Collect derives the nonce from runID (the run directory's name)
	// and artifacts (the "sha256:<hex>" digests of the artifacts built
	// so far), stores the evidence under the run directory dir and
	// returns the record run.json keeps (gpu_evidence). A non-nil error
	// (requireGPUEvidence with an unattested GPU) fails every gpu: true
	// step, or the run without one, with the error's text; the record is
	// kept either way.
	Collect(ctx context.Context, dir, runID string, artifacts []string) (record json.RawMessage, err error)
}

// WithGPUEvidence collects the GPUs' evidence with c (EvidenceCollector).
func WithGPUEvidence(c EvidenceCollector) Option {
	return func(o *options) error { o.evidence = c; return nil }
}

// WithLockDigest records the digest of the lock file the run used.
func WithLockDigest(d string) Option {
	return func(o *options) error { o.lockDigest = d; return nil }
}

// WithToolchain records a toolchain fingerprint (computed once per run).
func WithToolchain(f func(ctx context.Context) any) Option {
	return func(o *options) error { o.toolchain = f; return nil }
}

// WithSource records the git source the run was made from (its remote,
// commit and whether the tree was dirty) in run.json; a resume records
// the source of its own attempt.
func WithSource(info *source.Info) Option {
	return func(o *options) error { o.source = info; return nil }
}

// WithBaseEnv sets the host environment steps start from (default: this
// process's environment): host steps get all of it, docker and bwrap
// steps only the variables passEnv names, and no step ever gets a
// signing secret (pipeline.SigningSecret). Pipeline and step env are
// added on top.
func WithBaseEnv(env []string) Option {
	return func(o *options) error { o.baseEnv = env; return nil }
}

func defaultOptions() *options {
	return &options{
		jobs:      runtime.NumCPU(),
		logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		version:   "devel",
		executors: map[string]step.Executor{pipeline.KindExec: Exec{}},
		runners:   map[string]runner.Runner{"host": &runner.Host{}},
		now:       time.Now,
	}
}
