package run

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines" // the engines a fleet file may name
)

// ErrFleetInput marks a Fleet or CollectFleet error caused by its input
// (a pipeline with nothing to dispatch, an engine's settings, a run
// directory that is not a dispatch's): nothing was run.
var ErrFleetInput = errors.New("bad fleet input")

// ErrFleetBuildFailed is Fleet's error when the build part ran and did
// not pass; the FleetResult's Build says why.
var ErrFleetBuildFailed = errors.New("the build failed: nothing was dispatched")

// inputError is an error of ErrFleetInput's kind, worded as its cause.
type inputError struct{ err error }

func (e inputError) Error() string   { return e.err.Error() }
func (e inputError) Unwrap() []error { return []error{e.err, ErrFleetInput} }

func badFleet(format string, a ...any) error { return inputError{fmt.Errorf(format, a...)} }

// FleetOption configures Fleet and CollectFleet.
type FleetOption func(*fleetOptions)

type fleetOptions struct {
	dir      string
	build    func(build *pipeline.Pipeline) ([]Option, error)
	signer   func() (*sign.Signer, error)
	binaries map[string]string
	access   fleet.Access
	poll     time.Duration
	registry []oci.Option
	simulate bool
	detach   bool
	timeout  time.Duration
	progress func(FleetEvent)
	// gpuEvidence verifies the nodes' GPU evidence at collection.
	gpuEvidence        []gpuevidence.Option
	requireGPUEvidence bool
}

// WithFleetGPUEvidence verifies the nodes' GPU evidence, when the bundles
// are collected, with these options (a test root, RIMs kept offline)
// instead of NVIDIA's pinned roots; require fails a job with an
// unattested GPU or no evidence.
func WithFleetGPUEvidence(require bool, opts ...gpuevidence.Option) FleetOption {
	return func(o *fleetOptions) { o.gpuEvidence, o.requireGPUEvidence = opts, require }
}

// WithFleetDir is the run directory of the dispatch (default
// .gpuattest/runs/TIME-NAME-fleet); the build part runs in its build/.
func WithFleetDir(dir string) FleetOption { return func(o *fleetOptions) { o.dir = dir } }

// WithBuildOptions gives the options of the build part's run, made once
// the build part is known (its progress renders the build's steps).
// Fleet sets the build's output directory itself, and the build runs
// unsigned: the dispatch signs its outputs.
func WithBuildOptions(f func(build *pipeline.Pipeline) ([]Option, error)) FleetOption {
	return func(o *fleetOptions) { o.build = f }
}

// WithFleetSigner gives the release owner's signer, which signs the
// dispatch. Fleet calls it after its cheap checks and before the build,
// so that a fleet refused never asks for a keyless login. Required.
func WithFleetSigner(f func() (*sign.Signer, error)) FleetOption {
	return func(o *fleetOptions) { o.signer = f }
}

// WithNodeBinary is the gpuattest executable the nodes of this
// machine's own platform (linux/GOARCH) run; the default, on Linux, is
// this process's executable. WithPlatformNodeBinary names those of other
// platforms.
func WithNodeBinary(path string) FleetOption {
	return WithPlatformNodeBinary("linux/"+runtime.GOARCH, path)
}

// WithPlatformNodeBinary is the gpuattest executable the nodes of
// platform (GOOS/GOARCH, such as linux/arm64) run: a class's arch picks
// its platform (linux/amd64 when it names none). The dispatch checks each
// is an ELF executable for its machine and pins its digest; a class
// whose platform has none is refused before the build.
func WithPlatformNodeBinary(platform, path string) FleetOption {
	return func(o *fleetOptions) {
		if o.binaries == nil {
			o.binaries = map[string]string{}
		}
		o.binaries[platform] = path
	}
}

// WithFleetAccess is how the engine reaches its cluster (a Kubernetes
// kubeconfig and context), beside its settings in the fleet file.
func WithFleetAccess(a fleet.Access) FleetOption { return func(o *fleetOptions) { o.access = a } }

// WithFleetPoll overrides the engine's poll interval (the fleet file's,
// or the engine's default).
func WithFleetPoll(d time.Duration) FleetOption { return func(o *fleetOptions) { o.poll = d } }

// WithFleetRegistry are the options that reach the fleet's registry
// (staging on Kubernetes, the node bundles coming back).
func WithFleetRegistry(opts ...oci.Option) FleetOption {
	return func(o *fleetOptions) { o.registry = opts }
}

// WithSimulatedGPUs has each node simulate its GPUs from its class's
// gres type, labelled simulated; for tests and demos. Collecting then
// accepts simulated GPUs.
func WithSimulatedGPUs() FleetOption { return func(o *fleetOptions) { o.simulate = true } }

// Detached has Fleet return once the jobs are submitted;
// CollectFleet waits and collects later.
func Detached() FleetOption { return func(o *fleetOptions) { o.detach = true } }

// WithFleetTimeout cancels the jobs and fails after d (0: no limit).
func WithFleetTimeout(d time.Duration) FleetOption {
	return func(o *fleetOptions) { o.timeout = d }
}

// WithFleetProgress receives the dispatch's progress: the build part
// passed, the jobs submitted, then every poll of the jobs' states. The library never prints.
func WithFleetProgress(f func(FleetEvent)) FleetOption {
	return func(o *fleetOptions) { o.progress = f }
}

// FleetEvent is a step of a dispatch's progress. Built is true once when
// the build part passed; Submitted once when the jobs were submitted
// (Prepared is then set); otherwise it is a poll of the jobs. State is
// the coordinator's record at that time.
type FleetEvent struct {
	Built     bool
	Submitted bool
	Prepared  *coordinate.Prepared
	State     *coordinate.State
}

// FleetResult is what Fleet and CollectFleet did. Build is the build
// part's run (Fleet only); State the coordinator's record once
// submitted; Collected the node bundles' verification once collected
// (nil when detached). Dir is the run directory.
type FleetResult struct {
	Dir       string
	Build     *Result
	Prepared  *coordinate.Prepared
	State     *coordinate.State
	Collected *coordinate.Collected
}

func fleetOpts(opts []FleetOption) *fleetOptions {
	o := &fleetOptions{}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Fleet runs p across the fleet spec describes: the steps without
// gpu: true here, once (the build part, in DIR/build), then the gpu: true
// steps on every node of every class under a dispatch the owner signs,
// staged, submitted, waited for and collected. A build that does not
// pass returns ErrFleetBuildFailed; an input that cannot be dispatched
// an error of ErrFleetInput's kind. Wait's errors (context.Canceled,
// coordinate.ErrTimeout) come back as they are, with the result so far.
func Fleet(ctx context.Context, p *pipeline.Pipeline, spec *fleet.Spec, opts ...FleetOption) (*FleetResult, error) {
	o := fleetOpts(opts)
	if o.signer == nil {
		return nil, badFleet("a fleet run needs the release owner's signer: the dispatch is signed")
	}
	// Before the build: a sharedDir others could swap a dispatch
	// directory in is refused now (staging checks it again).
	if err := coordinate.CheckStaging(spec); err != nil {
		return nil, fmt.Errorf("staging the dispatch: %w", err)
	}
	binaries, err := nodeBinaries(o)
	if err != nil {
		return nil, err
	}
	if err := coordinate.CheckBinaries(spec, binaries); err != nil {
		return nil, inputError{fmt.Errorf("staging the dispatch: %w", err)}
	}
	build, nodes := coordinate.Split(p)
	if len(nodes.Steps) == 0 {
		return nil, badFleet("%s has no gpu: true step: there is nothing to run on the fleet", p.Path)
	}
	if len(build.Steps) == 0 {
		return nil, badFleet("%s has no step without gpu: true: the fleet needs build outputs to dispatch", p.Path)
	}
	res := &FleetResult{Dir: o.dir}
	if res.Dir == "" {
		res.Dir = filepath.Join(".gpuattest", "runs", time.Now().UTC().Format("20060102-150405")+"-"+p.Name+"-fleet")
	}
	signer, err := o.signer()
	if err != nil {
		return nil, err
	}
	var bopts []Option
	if o.build != nil {
		if bopts, err = o.build(build); err != nil {
			return nil, err
		}
	}
	bopts = append(bopts, WithOutDir(filepath.Join(res.Dir, coordinate.BuildDir)))
	if res.Build, err = Pipeline(ctx, build, bopts...); err != nil {
		return res, err
	}
	if !res.Build.Passed() {
		return res, ErrFleetBuildFailed
	}
	if o.progress != nil {
		o.progress(FleetEvent{Built: true})
	}
	return res, submitFleet(ctx, p, spec, signer, res, o)
}

// submitFleet stages and signs the dispatch, submits it, and waits and
// collects unless detached.
func submitFleet(ctx context.Context, p *pipeline.Pipeline, spec *fleet.Spec, signer *sign.Signer, res *FleetResult, o *fleetOptions) error {
	binaries, err := nodeBinaries(o)
	if err != nil {
		return err
	}
	e, err := openEngine(spec.Engine, spec.Config, spec.PollInterval.D, o)
	if err != nil {
		return err
	}
	// The dispatch names the cluster (its server and namespace, where
	// the engine has them); an engine that stages through a registry
	// stages in the run directory first.
	stage := coordinate.Stage{Pipeline: p, BuildDir: res.Build.Dir, Fleet: spec, Binaries: binaries, Signer: signer,
		ReleaseDir: filepath.Join(res.Dir, coordinate.ReleaseDir), StageDir: filepath.Join(res.Dir, "stage"),
		Registry: o.registry}
	if stage.Cluster, err = e.Describe(ctx); err != nil {
		return fmt.Errorf("describing the cluster: %w", err)
	}
	if res.Prepared, err = coordinate.Prepare(ctx, stage); err != nil {
		return fmt.Errorf("staging the dispatch: %w", err)
	}
	if res.State, err = coordinate.Submit(ctx, e, spec, res.Prepared, coordinate.TimeLimit(p), o.simulate, res.Dir); err != nil {
		return err
	}
	if o.progress != nil {
		o.progress(FleetEvent{Submitted: true, Prepared: res.Prepared, State: res.State})
	}
	if o.detach {
		return nil
	}
	res.Collected, err = waitAndCollect(ctx, e, res.State, res.Dir, o.simulate, o)
	return err
}

// nodeBinaries are the node binaries by platform: WithNodeBinary's, and
// on Linux this process's executable for its own platform unless given.
func nodeBinaries(o *fleetOptions) (map[string]string, error) {
	binaries := map[string]string{}
	maps.Copy(binaries, o.binaries)
	if self := fleet.Platform(runtime.GOARCH); runtime.GOOS == "linux" && binaries[self] == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		binaries[self] = exe
	}
	return binaries, nil
}

// CollectFleet waits for the detached dispatch in the run directory dir
// and collects its node bundles. Simulated GPUs are accepted when the
// dispatch simulated them or WithSimulatedGPUs says so.
func CollectFleet(ctx context.Context, dir string, opts ...FleetOption) (*FleetResult, error) {
	o := fleetOpts(opts)
	st, err := coordinate.LoadState(dir)
	if err != nil {
		return nil, inputError{err}
	}
	f, ok := fleet.Lookup(st.Cluster.Engine)
	if !ok {
		return nil, badFleet("%s names engine %q, which this gpuattest does not have (it has: %s)", coordinate.StateFile, st.Cluster.Engine, strings.Join(fleet.EngineNames(), ", "))
	}
	e, err := openEngine(st.Cluster.Engine, f.Recorded(st.Cluster), 0, o)
	if err != nil {
		return nil, err
	}
	res := &FleetResult{Dir: dir, State: st}
	res.Collected, err = waitAndCollect(ctx, e, st, dir, o.simulate || st.Simulated, o)
	return res, err
}

// openEngine opens the scheduler of the engine named for its settings
// cfg, throttled to poll (WithFleetPoll's when set, else the engine's
// default when 0).
func openEngine(name string, cfg fleet.EngineConfig, poll time.Duration, o *fleetOptions) (fleet.Scheduler, error) {
	if o.poll != 0 {
		poll = o.poll
	}
	e, err := fleet.Open(name, cfg, o.access, poll)
	if err != nil {
		return nil, inputError{err}
	}
	return e, nil
}

// waitAndCollect waits for the jobs, reporting every poll, and collects
// the node bundles.
func waitAndCollect(ctx context.Context, e fleet.Scheduler, st *coordinate.State, dir string, simulated bool, o *fleetOptions) (*coordinate.Collected, error) {
	err := coordinate.Wait(ctx, e, st, dir, o.timeout, func(s *coordinate.State) {
		if o.progress != nil {
			o.progress(FleetEvent{State: s})
		}
	})
	if err != nil {
		return nil, err
	}
	vo := dispatch.Options{AllowSimulated: simulated, GPUEvidence: o.gpuEvidence, RequireGPUEvidence: o.requireGPUEvidence}
	return coordinate.Collect(context.WithoutCancel(ctx), st, dir, vo, o.registry...)
}
