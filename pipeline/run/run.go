package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/source"
)

// ErrInvalid is wrapped by errors about the input rather than the run: a
// missing lock for a release, a key inside the root, a bad option. A
// front end reports them as usage errors; nothing was run.
var ErrInvalid = errors.New("invalid input")

// Result is a run's outcome.
type Result struct {
	// Dir is the run directory.
	Dir string
	// Record is run.json as it was when the run ended.
	Record *engine.Record
	// Attestation says what was signed; nil when nothing was.
	Attestation *Attestation
}

// Passed reports whether every step passed.
func (r *Result) Passed() bool { return r.Record != nil && r.Record.State == runtypes.Passed }

// Pipeline runs p: the steps as a DAG into a run directory, then, with a
// signer (WithSigner), the attestations. An error means the run could not
// be carried out or attested; a run whose steps failed is a Result that
// did not pass.
func Pipeline(ctx context.Context, p *pipeline.Pipeline, opts ...Option) (*Result, error) {
	o := options{warn: func(string) {}}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.runDirs > 1 {
		return nil, fmt.Errorf("%w: an output directory and a run to resume both name a run directory: give one", ErrInvalid)
	}
	if o.signer != nil {
		if err := CheckSigningFiles(p, map[string]string{"--key": o.keyFile}); err != nil {
			return nil, err
		}
		if w := hostStepsWarning(p); w != "" {
			o.warn(w)
		}
	}
	src := o.source
	if src == nil {
		var err error
		if src, err = sourceOf(ctx, p, o.warn); err != nil {
			return nil, err
		}
	}
	eopts, err := o.engineOptions(ctx, p)
	if err != nil {
		return nil, err
	}
	eopts = append(eopts, engine.WithSource(src))
	res, err := engine.Run(ctx, p, eopts...)
	if err != nil {
		return nil, err
	}
	out := &Result{Dir: res.Dir, Record: res.Record}
	if o.signer != nil && res.Record.State != runtypes.Interrupted {
		if out.Attestation, err = Attest(ctx, o.signer, p, res.Dir); err != nil {
			return out, fmt.Errorf("attesting the run: %w", err)
		}
	}
	return out, nil
}

// engineOptions turns o and what p needs into the engine's options.
func (o *options) engineOptions(ctx context.Context, p *pipeline.Pipeline) ([]engine.Option, error) {
	opts := append(executors(o.registry),
		engine.WithCacheCheck(func(sr *engine.StepRecord) error { _, err := rundir.DecodeStep(sr); return err }))
	opts = append(opts, o.engine...)
	base := o.baseEnv
	if base == nil {
		base = os.Environ()
	}
	if o.keyFile != "" {
		// No step learns where the key is, not even from a variable that
		// names it.
		base = withoutPath(base, o.keyFile)
	}
	opts = append(opts, engine.WithBaseEnv(base))
	u := usesOf(p)
	more, err := runnerOptions(p, u)
	if err != nil {
		return nil, err
	}
	opts = append(opts, more...)
	for _, r := range o.runners {
		opts = append(opts, engine.WithRunner(r))
	}
	if more, err = imageOptions(ctx, p, o.locked); err != nil {
		return nil, err
	}
	opts = append(opts, more...)
	src := o.gpuSource
	if src == nil {
		src = gpu.NVML("")
	}
	hw, rec, err := hardwareOptions(ctx, src, base)
	if err != nil {
		return nil, err
	}
	opts = append(opts, hw...)
	opts = append(opts, engine.WithGPUEvidence(&evidenceCollector{src: src, hw: rec, required: p.RequireGPUEvidence, rimStore: o.rimStore, now: time.Now, fleet: o.fleet}))
	if u.gpuStep && len(rec.GPUs) == 0 {
		o.warn(fmt.Sprintf("the pipeline has gpu: true steps but no GPU is available (%s); they will fail preflight", rec.Reason))
	}
	if rec.Simulated {
		o.warn("SIMULATED GPU (GPUATTEST_FAKE_GPU); results and attestations say so and default policies reject them")
	}
	if u.cudaOnHost {
		opts = append(opts, toolchainOption())
	}
	return opts, nil
}

// sourceOf describes the git work tree p runs in (nil outside one): its
// remote, commit and whether it is dirty. A release (release: true)
// refuses a dirty tree, naming the changed files, and a tree git cannot
// describe; other runs only warn.
func sourceOf(ctx context.Context, p *pipeline.Pipeline, warn func(string)) (*source.Info, error) {
	dir := p.Root
	if dir == "" {
		dir = p.Dir
	}
	if dir == "" {
		return nil, nil
	}
	info, err := source.Detect(ctx, dir)
	switch {
	case errors.Is(err, source.ErrNotRepository):
		return nil, nil
	case err != nil && p.Release:
		return nil, fmt.Errorf("%w: %s: release: true: recording the source commit: %w", ErrInvalid, p.Path, err)
	case err != nil:
		warn(fmt.Sprintf("the source commit is not recorded: %v", err))
		return nil, nil
	}
	if info.Root, err = info.RelativeRoot(dir); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, p.Path, err)
	}
	if p.Release {
		if err := info.CheckClean(p.Path + ": release: true"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if info.Dirty {
		warn(fmt.Sprintf("the source tree has uncommitted changes (%s); the attestations record it as dirty", strings.Join(info.DirtyFiles, ", ")))
	}
	return info, nil
}
