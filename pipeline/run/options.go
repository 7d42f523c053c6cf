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
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/source"
)

// Option configures Pipeline.
type Option func(*options) error

type options struct {
	// engine are the engine's own options (run directory, resume, jobs,
	// cache, version, logger, progress), passed through as given.
	engine []engine.Option
	// runDirs counts the options that named a run directory (WithOutDir,
	// WithResume): at most one may.
	runDirs   int
	locked    bool
	gpuSource gpu.Source
	signer    *sign.Signer
	keyFile   string
	baseEnv   []string
	warn      func(string)
	registry  []oci.Option
	source    *source.Info
	runners   []runner.Runner
	rimStore  string
	fleet     *fleetNonce
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

// withEngine is an Option that passes eo to the engine.
func withEngine(eo engine.Option) Option {
	return func(o *options) error { o.engine = append(o.engine, eo); return nil }
}

// WithOutDir writes the run into dir (default .gpuattest/runs/<time>-<name>;
// an empty dir leaves the default).
func WithOutDir(dir string) Option {
	if dir == "" {
		return func(*options) error { return nil }
	}
	return func(o *options) error {
		o.runDirs++
		return withEngine(engine.WithOutDir(dir))(o)
	}
}

// WithResume continues the run in dir (empty: none).
func WithResume(dir string) Option {
	if dir == "" {
		return func(*options) error { return nil }
	}
	return func(o *options) error {
		o.runDirs++
		return withEngine(engine.WithResume(dir))(o)
	}
}

// WithJobs runs at most n steps at once (default: the number of CPUs).
func WithJobs(n int) Option {
	if n < 1 {
		return func(*options) error { return fmt.Errorf("%w: jobs %d: expected 1 or more", ErrInvalid, n) }
	}
	return withEngine(engine.WithJobs(n))
}

// WithoutCache runs every build step, reading and writing no cache.
func WithoutCache() Option { return withEngine(engine.WithoutCache()) }

// WithCacheDir keeps the build cache in dir (empty: the default).
func WithCacheDir(dir string) Option {
	if dir == "" {
		return func(*options) error { return nil }
	}
	return withEngine(engine.WithCacheDir(dir))
}

// WithLocked refuses floating image tags and a missing or stale lock, as
// release: true does.
func WithLocked() Option {
	return func(o *options) error { o.locked = true; return nil }
}

// WithVersion names the gpuattest version the run records (and the build
// cache keys on); empty leaves the engine's default.
func WithVersion(v string) Option {
	if v == "" {
		return func(*options) error { return nil }
	}
	return withEngine(engine.WithVersion(v))
}

// WithLogger receives the run's diagnostics; nil discards them.
func WithLogger(l *slog.Logger) Option { return withEngine(engine.WithLogger(l)) }

// WithProgress receives an Event as steps start, are skipped and finish.
func WithProgress(f func(runtypes.Event)) Option {
	if f == nil {
		return func(*options) error { return nil }
	}
	return withEngine(engine.WithProgress(f))
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

// WithRIMStore copies the collateral in dir (RIMs as <RIM ID>.xml, OCSP
// answers as *.ocsp) beside the run's GPU evidence, so that verify needs
// no network (gpuattest run --rim-store).
func WithRIMStore(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return fmt.Errorf("%w: --rim-store: empty directory", ErrInvalid)
		}
		o.rimStore = dir
		return nil
	}
}

// WithFleetNonce asks each GPU to sign gpuevidence.FleetNonce of the
// signed dispatch's digest, the job and its UUID instead of the run's
// nonce: a fleet node's run.
func WithFleetNonce(dispatchDigest, job string) Option {
	return func(o *options) error {
		if dispatchDigest == "" || job == "" {
			return fmt.Errorf("%w: fleet nonce: the dispatch digest and the job are required", ErrInvalid)
		}
		o.fleet = &fleetNonce{dispatch: dispatchDigest, job: job}
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
