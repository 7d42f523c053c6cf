package run

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/source"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Event is a progress event of a run (a step started, was skipped or
// finished).
type Event = engine.Event

// Option configures Pipeline.
type Option func(*options) error

type options struct {
	out, resume string
	jobs        int
	noCache     bool
	cacheDir    string
	locked      bool
	version     string
	logger      *slog.Logger
	progress    func(Event)
	gpuSource   gpu.Source
	signer      *sign.Signer
	keyFile     string
	baseEnv     []string
	warn        func(string)
	registry    []oci.Option
	source      *source.Info
	runners     []runner.Runner
}

// WithRunners makes rs available to the steps, each under its Name,
// in place of the runner of that name the run would otherwise use (a
// rebuild puts a runner.Sandbox in the host runner's place).
func WithRunners(rs ...runner.Runner) Option {
	return func(o *options) error {
		for _, r := range rs {
			if r == nil {
				return errors.New("nil runner")
			}
		}
		o.runners = append(o.runners, rs...)
		return nil
	}
}

// WithSource records info as the run's source instead of describing the
// git work tree the pipeline is in (a rebuild runs in a copy of a
// verified tree, outside any repository).
func WithSource(info *source.Info) Option {
	return func(o *options) error { o.source = info; return nil }
}

// WithOutDir writes the run into dir (default .gpuattest/runs/<time>-<name>).
func WithOutDir(dir string) Option {
	return func(o *options) error { o.out = dir; return nil }
}

// WithResume continues the run in dir.
func WithResume(dir string) Option {
	return func(o *options) error { o.resume = dir; return nil }
}

// WithJobs runs at most n steps at once.
func WithJobs(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: jobs %d: expected 1 or more", ErrInvalid, n)
		}
		o.jobs = n
		return nil
	}
}

// WithoutCache runs every build step, reading and writing no cache.
func WithoutCache() Option {
	return func(o *options) error { o.noCache = true; return nil }
}

// WithCacheDir keeps the build cache in dir.
func WithCacheDir(dir string) Option {
	return func(o *options) error { o.cacheDir = dir; return nil }
}

// WithLocked refuses floating image tags and a missing or stale lock, as
// release: true does.
func WithLocked() Option {
	return func(o *options) error { o.locked = true; return nil }
}

// WithVersion names the gpuattest version the run records (and the build
// cache keys on).
func WithVersion(v string) Option {
	return func(o *options) error { o.version = v; return nil }
}

// WithLogger receives the run's diagnostics; nil discards them.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.logger = l
		return nil
	}
}

// WithProgress receives an Event as steps start, are skipped and finish.
func WithProgress(f func(Event)) Option {
	return func(o *options) error { o.progress = f; return nil }
}

// WithWarnings receives warnings meant for the user before the run starts
// (gpu: true steps with no GPU, simulated hardware, a signed release with
// host steps).
func WithWarnings(f func(string)) Option {
	return func(o *options) error { o.warn = f; return nil }
}

// WithGPUSource reads the hardware record from src (default: the real
// NVML).
func WithGPUSource(src gpu.Source) Option {
	return func(o *options) error {
		if src == nil {
			return errors.New("nil GPU source")
		}
		o.gpuSource = src
		return nil
	}
}

// WithSigner signs the run's attestations with s when the run ends (not
// when it is interrupted). keyFile is the key s was made from, empty for
// keyless: no step learns its path, and Pipeline refuses one inside the
// pipeline's root (see CheckSigningFiles).
func WithSigner(s *sign.Signer, keyFile string) Option {
	return func(o *options) error {
		if s == nil {
			return errors.New("nil signer")
		}
		o.signer, o.keyFile = s, keyFile
		return nil
	}
}

// WithBaseEnv is the environment steps start from (default: this
// process's; sandboxed steps get only what passEnv names).
func WithBaseEnv(env []string) Option {
	return func(o *options) error { o.baseEnv = env; return nil }
}

// WithReferenceRegistry passes options to attest/oci (credentials, plain
// HTTP hosts, concurrency, retries) for reading the published releases
// benchmark references name (reference.release).
func WithReferenceRegistry(opts ...oci.Option) Option {
	return func(o *options) error { o.registry = append(o.registry, opts...); return nil }
}

// Progress is what a running step reports of itself (burn-in iterations,
// benchmark samples, a preflight), carried by an Event of type progress.
type Progress = step.Progress

// Record is run.json (engine.Record), for front ends that render it.
type Record = engine.Record

// State is the state of a run or a step.
type State = engine.State

// The states a run and its steps end in.
const (
	Passed      = engine.Passed
	Failed      = engine.Failed
	Skipped     = engine.Skipped
	Error       = engine.Error
	Interrupted = engine.Interrupted
)
