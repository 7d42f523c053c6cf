package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/envlist"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Result is a finished (or interrupted) run.
type Result struct {
	// Dir is the run directory.
	Dir string
	// Record is the final run.json.
	Record *Record
}

// Passed reports whether every step passed.
func (r *Result) Passed() bool { return r.Record.State == runtypes.Passed }

// Run executes p's steps as a DAG with bounded parallelism, writing the
// run directory as it goes. A step that fails marks its dependents skipped
// while independent branches finish. Run returns an error only when the run
// could not be carried out (bad options, unusable run directory); failed
// steps are in the Result.
func Run(ctx context.Context, p *pipeline.Pipeline, opts ...Option) (*Result, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	e := &run{o: o, p: p, byID: map[string]int{}}
	for i := range p.Steps {
		e.byID[p.Steps[i].ID] = i
	}
	if err := e.prepare(ctx); err != nil {
		return nil, err
	}
	e.execute(ctx)
	return e.finish(ctx)
}

// run is one execution of a pipeline.
type run struct {
	o    *options
	p    *pipeline.Pipeline
	dir  string // as given (shown to the user)
	abs  string // absolute form of dir
	root string // the pipeline's root, absolute, symlinks resolved
	byID map[string]int
	rec  *recorder
	// keep marks steps a resume keeps as passed.
	keep    []bool
	cache   *cache
	progMu  sync.Mutex
	attempt int
	// toolchain is the run record's toolchain fingerprint (the builds'),
	// which GPU preflight checks the driver against.
	toolchain any
	// evidenceOnce collects the GPUs' evidence once (evidence.go);
	// evidenceErr is what it said.
	evidenceOnce sync.Once
	evidenceErr  error
}

func (e *run) prepare(ctx context.Context) error {
	now := e.o.now().UTC()
	root := e.p.Root
	if root == "" {
		root = e.p.Dir
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("resolving the pipeline's root: %w", err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	e.root = root
	var rec *Record
	if e.o.resume != "" {
		e.dir = e.o.resume
		prev, err := ReadRecord(e.dir)
		if err != nil {
			return fmt.Errorf("resuming: %w\nhint: --resume takes a run directory written by gpuattest run", err)
		}
		if prev.Pipeline.Digest != e.p.Digest {
			return fmt.Errorf("resuming %s: the pipeline changed since that run (digest %s, now %s)\nhint: start a new run; resume only continues the same pipeline", e.dir, short(prev.Pipeline.Digest), short(e.p.Digest))
		}
		rec = prev
		rec.State, rec.Reason, rec.FinishedAt = runtypes.Running, "", nil
		rec.Attempts = append(rec.Attempts, Attempt{StartedAt: now, Resume: true})
		e.keep = e.resumePlan(rec)
	} else {
		e.dir = e.o.outDir
		if e.dir == "" {
			e.dir = filepath.Join(".gpuattest", "runs", now.Format("20060102T150405Z")+"-"+e.p.Name)
		}
		if entries, err := os.ReadDir(e.dir); err == nil && len(entries) > 0 {
			return fmt.Errorf("run directory %s exists and is not empty\nhint: pass --resume %s to continue that run, or choose another --out", e.dir, e.dir)
		}
		rec = &Record{
			Schema:    RecordSchema,
			Pipeline:  PipelineRef{Name: e.p.Name, Path: e.p.Path, Digest: e.p.Digest},
			State:     runtypes.Running,
			StartedAt: now,
			Attempts:  []Attempt{{StartedAt: now}},
		}
		for i := range e.p.Steps {
			s := &e.p.Steps[i]
			rec.Steps = append(rec.Steps, &StepRecord{ID: s.ID, Kind: s.Kind, State: runtypes.Pending})
		}
		e.keep = make([]bool, len(e.p.Steps))
	}
	rec.Version = e.o.version
	rec.LockDigest = e.o.lockDigest
	rec.Source = e.o.source
	e.attempt = len(rec.Attempts) - 1
	abs, err := filepath.Abs(e.dir)
	if err != nil {
		return fmt.Errorf("resolving run directory: %w", err)
	}
	e.abs = abs
	if err := os.MkdirAll(runlayout.Steps(e.dir), 0o755); err != nil {
		return fmt.Errorf("creating run directory: %w", err)
	}
	if hw := e.o.hardware; hw != nil {
		raw, err := json.Marshal(hw)
		if err != nil {
			return fmt.Errorf("encoding the hardware record: %w", err)
		}
		if err := atomicfile.Write(runlayout.Hardware(e.dir), raw, 0o644); err != nil {
			return err
		}
		rec.Hardware = &HardwareRef{Digest: hw.Digest, Simulated: hw.Simulated, File: runlayout.HardwareFile}
	}
	if e.o.toolchain != nil && !(rec.Toolchain != nil && e.buildsKept()) {
		rec.Toolchain = e.o.toolchain(ctx)
	}
	e.toolchain = rec.Toolchain
	if !e.o.noCache {
		dir := e.o.cacheDir
		if dir == "" {
			var err error
			if dir, err = image.DefaultCacheDir(); err != nil {
				// Never a shared temporary directory: anyone could plant
				// cache entries there.
				e.o.logger.Warn("running without the build cache", "reason", err)
			}
		}
		if dir != "" {
			e.cache = &cache{dir: dir}
		}
	}
	e.rec = newRecorder(runlayout.Record(e.dir), rec)
	return e.rec.flush()
}

// buildsKept reports whether a resume keeps every cuda-build step: the
// toolchain that built them is then the one already recorded, not this
// machine's (which may have none: a run built on one machine and
// finished on a GPU machine).
func (e *run) buildsKept() bool {
	for i := range e.p.Steps {
		if e.p.Steps[i].Kind == pipeline.KindCUDABuild && !e.keep[i] {
			return false
		}
	}
	return true
}

// resumePlan decides which passed steps a resume keeps: those whose
// recorded outputs are unchanged and none of whose needs run again.
func (e *run) resumePlan(rec *Record) []bool {
	keep := make([]bool, len(e.p.Steps))
	att := &rec.Attempts[len(rec.Attempts)-1]
	// Index the record by id; steps added since cannot exist (same digest).
	for i := range e.p.Steps {
		s := &e.p.Steps[i]
		sr := rec.Step(s.ID)
		if sr == nil {
			sr = &StepRecord{ID: s.ID, Kind: s.Kind}
			rec.Steps = append(rec.Steps, sr)
		}
		if sr.State != runtypes.Passed {
			continue
		}
		if why := e.changedOutputs(s, sr); why != "" {
			att.Reran = append(att.Reran, s.ID+": "+why)
			continue
		}
		keep[i] = true
	}
	// A step runs again when any step it needs runs again.
	for changed := true; changed; {
		changed = false
		for i := range e.p.Steps {
			if !keep[i] {
				continue
			}
			for _, n := range e.p.Steps[i].Needs {
				if !keep[e.byID[n]] {
					keep[i] = false
					changed = true
					att.Reran = append(att.Reran, e.p.Steps[i].ID+": needs "+n+", which runs again")
					break
				}
			}
		}
	}
	for i := range e.p.Steps {
		if keep[i] {
			continue
		}
		sr := rec.Step(e.p.Steps[i].ID)
		*sr = StepRecord{ID: sr.ID, Kind: e.p.Steps[i].Kind, State: runtypes.Pending, Runs: sr.Runs}
	}
	return keep
}

// changedOutputs re-hashes a passed step's recorded outputs in its work
// directory; it says why when one is missing or differs.
func (e *run) changedOutputs(s *pipeline.Step, sr *StepRecord) string {
	if len(sr.Outputs) == 0 {
		return ""
	}
	wd, err := e.workDir(s)
	if err != nil {
		return firstLine(err.Error())
	}
	w, err := openWorkTree(wd)
	if err != nil {
		return err.Error()
	}
	defer w.Close()
	for _, f := range sr.Outputs {
		cur, err := w.current(f)
		if err != nil {
			return fmt.Sprintf("output %s is missing", f.Path)
		}
		switch {
		case cur.Link != f.Link:
			return fmt.Sprintf("output %s changed since it was recorded (link %q, now %q)", f.Path, f.Link, cur.Link)
		case cur.SHA256 != f.SHA256:
			return fmt.Sprintf("output %s changed since it was recorded (sha256 %s, now %s)", f.Path, short12(f.SHA256), short12(cur.SHA256))
		}
	}
	return ""
}

func short12(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// workDir resolves a step's work dir: the root joined with the step's
// workdir, symlinks resolved, and inside the root, or an error. The step
// runs there and container runners bind only it, so a workdir that
// leaves the root (by .. or through a symlink) never runs.
func (e *run) workDir(s *pipeline.Step) (string, error) {
	const hint = "\nhint: a step's workdir is relative to the pipeline's workdir (its root) and stays inside it"
	rel := filepath.FromSlash(s.Workdir)
	if c := filepath.Clean(rel); filepath.IsAbs(rel) || (c != "." && !filepath.IsLocal(c)) {
		return "", fmt.Errorf("workdir %q is outside the pipeline's root %s"+hint, s.Workdir, e.root)
	}
	wd := filepath.Join(e.root, rel)
	real, err := filepath.EvalSymlinks(wd)
	if err != nil {
		return "", fmt.Errorf("work directory %s does not exist\nhint: a step's workdir is relative to the pipeline's workdir (the pipeline file's directory by default)", wd)
	}
	if !within(e.root, real) {
		return "", fmt.Errorf("workdir %q resolves to %s, outside the pipeline's root %s (through a symlink)"+hint, s.Workdir, real, e.root)
	}
	return real, nil
}

// stepProgress passes a running step's reports on as progress events;
// nil without a progress receiver.
func (e *run) stepProgress(s *pipeline.Step) func(runtypes.Progress) {
	if e.o.progress == nil {
		return nil
	}
	return func(p runtypes.Progress) {
		e.emit(runtypes.Event{Type: "progress", Step: s.ID, Kind: s.Kind, State: runtypes.Running, Progress: &p})
	}
}

func (e *run) emit(ev runtypes.Event) {
	if e.o.progress == nil {
		return
	}
	e.progMu.Lock()
	defer e.progMu.Unlock()
	e.o.progress(ev)
}

// execute schedules the DAG: a step starts when every step it needs has
// passed and nothing running holds what it claims exclusively (see
// exclusive), at most jobs at a time; a step whose need did not pass is
// skipped.
func (e *run) execute(ctx context.Context) {
	n := len(e.p.Steps)
	state := make([]runtypes.State, n)
	for i := range state {
		if e.keep[i] {
			state[i] = runtypes.Passed
		} else {
			state[i] = runtypes.Pending
		}
	}
	type done struct {
		i     int
		state runtypes.State
	}
	finished := make(chan done)
	running := 0
	sem := e.o.jobs
	claims := make([]claim, n)
	for i := range claims {
		claims[i] = e.exclusive(&e.p.Steps[i])
	}
	var held locks
	for {
		// Start or skip every step that can move.
		progressed := true
		for progressed {
			progressed = false
			for i := 0; i < n; i++ {
				if state[i] != runtypes.Pending {
					continue
				}
				ready, blocked, why := true, false, ""
				for _, need := range e.p.Steps[i].Needs {
					switch st := state[e.byID[need]]; st {
					case runtypes.Passed:
					case runtypes.Failed, runtypes.Error, runtypes.Skipped:
						blocked, why = true, fmt.Sprintf("needs %s, which %s", need, verb(st))
					default:
						ready = false
					}
				}
				switch {
				case blocked:
					state[i] = runtypes.Skipped
					e.skip(i, why)
					progressed = true
				case ready && running < sem && ctx.Err() == nil && held.take(i, claims[i]):
					state[i] = runtypes.Running
					running++
					progressed = true
					go func(i int) {
						finished <- done{i, e.runStep(ctx, i)}
					}(i)
				}
			}
		}
		if running == 0 {
			return
		}
		d := <-finished
		running--
		held.release(d.i)
		state[d.i] = d.state
	}
}

func verb(s runtypes.State) string {
	switch s {
	case runtypes.Failed:
		return "failed"
	case runtypes.Error:
		return "errored"
	default:
		return "was skipped"
	}
}

func (e *run) skip(i int, why string) {
	s := &e.p.Steps[i]
	e.rec.update(func(r *Record) {
		sr := r.Step(s.ID)
		sr.State, sr.Reason = runtypes.Skipped, why
	})
	e.emit(runtypes.Event{Type: "skip", Step: s.ID, Kind: s.Kind, State: runtypes.Skipped, Reason: why})
}

func (e *run) finish(ctx context.Context) (*Result, error) {
	evidenceErr := e.gpuEvidenceAtEnd(ctx)
	now := e.o.now().UTC()
	var final *Record
	e.rec.update(func(r *Record) {
		r.FinishedAt = &now
		r.Attempts[e.attempt].FinishedAt = &now
		var failed, pending []string
		for _, s := range r.Steps {
			switch s.State {
			case runtypes.Failed, runtypes.Error, runtypes.Skipped:
				failed = append(failed, s.ID)
			case runtypes.Pending, runtypes.Running:
				pending = append(pending, s.ID)
			}
		}
		switch {
		case ctx.Err() != nil:
			r.State = runtypes.Interrupted
			r.Reason = "interrupted: " + context.Cause(ctx).Error()
		case len(failed) > 0:
			r.State = runtypes.Failed
			r.Reason = "steps not passed: " + strings.Join(failed, ", ")
		case len(pending) > 0:
			r.State = runtypes.Error
			r.Reason = "steps never ran: " + strings.Join(pending, ", ")
		case evidenceErr != nil:
			r.State = runtypes.Failed
			r.Reason = "GPU evidence: " + evidenceErr.Error()
		default:
			r.State = runtypes.Passed
		}
		b, _ := json.Marshal(r)
		final = &Record{}
		_ = json.Unmarshal(b, final)
	})
	if err := e.rec.close(); err != nil {
		return nil, err
	}
	return &Result{Dir: e.dir, Record: final}, nil
}

// runStep runs step i to its final state.
func (e *run) runStep(ctx context.Context, i int) runtypes.State {
	s := &e.p.Steps[i]
	start := e.o.now().UTC()
	e.rec.update(func(r *Record) {
		sr := r.Step(s.ID)
		*sr = StepRecord{ID: s.ID, Kind: s.Kind, State: runtypes.Running, StartedAt: &start, Runs: sr.Runs + 1}
	})
	e.emit(runtypes.Event{Type: "start", Step: s.ID, Kind: s.Kind, State: runtypes.Running})

	sr, err := e.stepBody(ctx, s)
	if sr == nil {
		sr = &StepRecord{}
	}
	switch {
	case err != nil && ctx.Err() != nil:
		sr.State, sr.Reason = runtypes.Error, "interrupted: "+context.Cause(ctx).Error()
	case err != nil:
		sr.State, sr.Reason = runtypes.Error, err.Error()
	}
	end := e.o.now().UTC()
	sr.ID, sr.Kind, sr.StartedAt, sr.FinishedAt = s.ID, s.Kind, &start, &end
	sr.DurationMS = end.Sub(start).Milliseconds()
	e.rec.update(func(r *Record) {
		cur := r.Step(s.ID)
		sr.Runs = cur.Runs
		*cur = *sr
	})
	e.emit(runtypes.Event{Type: "finish", Step: s.ID, Kind: s.Kind, State: sr.State, Cache: sr.Cache, Duration: end.Sub(start), Reason: sr.Reason})
	return sr.State
}

// stepBody does the work of one step and returns its record (State set
// to Passed or Failed), or an error for a step that could not be carried
// out: prepare its context, restore it from the build cache or run it
// (with preflight and telemetry around gpu: true steps), then collect,
// cache and copy its outputs.
func (e *run) stepBody(ctx context.Context, s *pipeline.Step) (*StepRecord, error) {
	sr := &StepRecord{Cache: "off"}
	sc, logs, err := e.prepareStep(ctx, s, sr)
	if logs != nil {
		defer logs.Close()
	}
	if err != nil {
		return sr, err
	}
	exec, ok := e.o.executors[s.Kind]
	if !ok {
		return sr, fmt.Errorf("no executor for step kind %q in this build", s.Kind)
	}
	w, err := openWorkTree(sc.WorkDir)
	if err != nil {
		return sr, err
	}
	defer w.Close()
	inputs, err := hashInputs(s, w)
	if err != nil {
		sr.State, sr.Reason = runtypes.Failed, err.Error()
		return sr, nil
	}
	sr.Inputs = inputs

	key, hit, err := e.fromCache(ctx, exec, s, sc, w, sr)
	if err != nil || hit {
		return sr, err
	}
	out, err := e.executeStep(ctx, exec, s, sc, sr)
	if err != nil || out == nil {
		return sr, err
	}
	if out.Status != step.Passed {
		sr.State, sr.Reason = runtypes.Failed, out.Reason
		if sr.Reason == "" {
			sr.Reason = "failed"
		}
		return sr, nil
	}
	return sr, e.finishOutputs(ctx, s, sc, w, sr, out, key)
}

// stepLogs are a step's stdout.log and stderr.log.
type stepLogs struct{ stdout, stderr *os.File }

// Close closes both logs.
func (l *stepLogs) Close() {
	if l.stdout != nil {
		l.stdout.Close()
	}
	if l.stderr != nil {
		l.stderr.Close()
	}
}

// prepareStep makes the step's directory and logs, picks its runner,
// resolves its workdir and image, and builds its environment.
func (e *run) prepareStep(ctx context.Context, s *pipeline.Step, sr *StepRecord) (*step.Context, *stepLogs, error) {
	stepDir := runlayout.StepDir(e.abs, s.ID)
	if err := os.RemoveAll(stepDir); err != nil {
		return nil, nil, fmt.Errorf("clearing %s: %w", stepDir, err)
	}
	if err := os.MkdirAll(stepDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating step directory: %w", err)
	}
	logs := &stepLogs{}
	var err error
	if logs.stdout, err = os.Create(filepath.Join(stepDir, runlayout.StdoutLog)); err != nil {
		return nil, logs, err
	}
	if logs.stderr, err = os.Create(filepath.Join(stepDir, runlayout.StderrLog)); err != nil {
		return nil, logs, err
	}
	r, ok := e.o.runners[s.Runner]
	if !ok {
		return nil, logs, fmt.Errorf("runner %q is not available\nhint: the %s runner needs its tool installed (docker or bwrap)", s.Runner, s.Runner)
	}
	info := runner.Info{Name: r.Name()}
	if d, ok := r.(interface{ Info() runner.Info }); ok {
		info = d.Info()
	}
	wd, err := e.workDir(s)
	if err != nil {
		return nil, logs, err
	}
	sc := &step.Context{
		Pipeline: e.p, Step: s, Runner: r, Root: e.root, WorkDir: wd, StepDir: stepDir,
		Stdout: logs.stdout, Stderr: logs.stderr, Logger: e.o.logger.With("step", s.ID), Hardware: e.o.hardware,
		Progress: e.stepProgress(s),
	}
	if err := e.pinImage(ctx, s, sc, &info); err != nil {
		return nil, logs, err
	}
	sr.Runner = &info
	if st, err := os.Stat(sc.WorkDir); err != nil || !st.IsDir() {
		return nil, logs, fmt.Errorf("work directory %s does not exist\nhint: a step's workdir is relative to the pipeline's workdir (the pipeline file's directory by default)", sc.WorkDir)
	}
	sc.Env = e.env(s, stepDir, r.Name() == "host")
	if s.GPU {
		sr.CUDAVisibleDevices, _ = envlist.Lookup(sc.Env, "CUDA_VISIBLE_DEVICES")
	}
	return sc, logs, nil
}

// pinImage pins the step's image to its digests, for the runner and
// run.json.
func (e *run) pinImage(ctx context.Context, s *pipeline.Step, sc *step.Context, info *runner.Info) error {
	if s.Image == "" {
		return nil
	}
	if e.o.images == nil {
		return fmt.Errorf("step %s needs image %s but this build cannot resolve images", s.ID, s.Image)
	}
	pinned, err := e.o.images(ctx, s.Image, e.p.Images[s.Image])
	if err != nil {
		return fmt.Errorf("resolving image %s: %w", s.Image, err)
	}
	pinned.Name, pinned.Reference = s.Image, e.p.Images[s.Image]
	sc.Image, info.Image = pinned, pinned.String()
	e.rec.update(func(rec *Record) { addImage(rec, pinned) })
	return nil
}

// fromCache restores a cacheable step from the build cache. It returns
// the cache key (empty when the step is not cached) and whether the step
// was restored, in which case sr is final.
func (e *run) fromCache(ctx context.Context, exec step.Executor, s *pipeline.Step, sc *step.Context, w *workTree, sr *StepRecord) (string, bool, error) {
	if e.cache == nil || !s.Cacheable() || (len(s.Outputs) == 0 && s.Kind != pipeline.KindCUDABuild) {
		return "", false, nil
	}
	var facts any
	if kf, ok := exec.(step.KeyFacter); ok {
		var err error
		if facts, err = kf.CacheKeyFacts(ctx, sc); err != nil {
			if ctx.Err() != nil {
				return "", false, context.Cause(ctx)
			}
			sr.Notes = append(sr.Notes, "not cached: "+err.Error())
			return "", false, nil
		}
	}
	key, notes, err := e.cacheKey(s, sc, sr.Inputs, facts)
	if err != nil {
		return "", false, err
	}
	sr.CacheKey, sr.Notes = key, append(sr.Notes, notes...)
	sr.Cache = "miss"
	m, ok := e.cache.lookup(key)
	if !ok {
		return key, false, nil
	}
	// A build's entry must list what its compiler read: one without
	// (written before reads were tracked) could hide a changed header.
	if s.Kind == pipeline.KindCUDABuild && len(m.Reads) == 0 {
		sr.Notes = append(sr.Notes, "cache entry lists no files the build read, running")
		return key, false, nil
	}
	if why := checkReads(m, w); why != "" {
		sr.Notes = append(sr.Notes, "cache entry stale, running: "+why)
		return key, false, nil
	}
	if e.o.checkCache != nil {
		probe := *sr
		probe.ID, probe.Kind = s.ID, s.Kind
		probe.Artifacts, probe.Results, probe.Details = m.Artifacts, m.Results, m.Details
		if err := e.o.checkCache(&probe); err != nil {
			sr.Notes = append(sr.Notes, "cache entry unreadable (written by another gpuattest build?), running: "+err.Error())
			return key, false, nil
		}
	}
	files, err := e.cache.restore(m, w)
	if err != nil {
		sr.Notes = append(sr.Notes, "cache entry unusable, running: "+err.Error())
		return key, false, nil
	}
	sr.Cache, sr.State, sr.ExitCode = "hit", runtypes.Passed, m.ExitCode
	sr.Outputs, sr.Artifacts, sr.Results, sr.Details, sr.Reads = files, m.Artifacts, m.Results, m.Details, m.Reads
	sr.Notes = append(sr.Notes, "restored from the build cache")
	return key, true, e.cache.linkOutputs(sc.StepDir, files)
}

// executeStep runs the executor within the step's timeout, with GPU preflight
// before and telemetry around a gpu: true step, and records what it
// reported. A nil outcome with a nil error means sr is final (preflight
// failed, or the step timed out).
func (e *run) executeStep(ctx context.Context, exec step.Executor, s *pipeline.Step, sc *step.Context, sr *StepRecord) (*step.Outcome, error) {
	var watch Watch
	if s.GPU {
		if err := e.gpuEvidence(ctx); err != nil {
			sr.State, sr.Reason = runtypes.Failed, "GPU evidence: "+err.Error()
			return nil, nil
		}
	}
	if s.GPU && e.o.monitor != nil {
		sc.Report(runtypes.Progress{Phase: "preflight"})
		report, err := e.o.monitor.Preflight(ctx, e.p, s, sc.Env, e.toolchain)
		if report != nil {
			sr.Preflight = mustJSON(report)
		}
		if err != nil {
			sr.State, sr.Reason = runtypes.Failed, "preflight: "+err.Error()
			return nil, nil
		}
		if watch, err = e.o.monitor.Watch(ctx, s, sc.StepDir, sc.Env); err != nil {
			return nil, fmt.Errorf("starting telemetry: %w", err)
		}
		// Preflight is over: a step that reports nothing until it ends (a
		// sustained burn-in is one invocation) must not show it for its
		// whole run.
		sc.Report(runtypes.Progress{Phase: "running"})
	}
	runCtx := ctx
	if t := s.Timeout.Value(); t > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, t, fmt.Errorf("timed out after %s", s.Timeout))
		defer cancel()
	}
	out, execErr := exec.Execute(runCtx, sc)
	if watch != nil {
		device := ""
		if out != nil {
			device = out.DeviceUUID
		}
		summary, failure, werr := watch.Stop(device)
		if summary != nil {
			sr.Telemetry = mustJSON(summary)
		}
		if werr != nil && execErr == nil {
			execErr = fmt.Errorf("telemetry: %w", werr)
		}
		if failure != "" && out != nil {
			out.Status, out.Reason = step.Failed, "hardware: "+failure
		}
	}
	if runCtx.Err() != nil && ctx.Err() == nil {
		sr.State, sr.Reason = runtypes.Failed, context.Cause(runCtx).Error()
		return nil, nil
	}
	if execErr != nil {
		return nil, execErr
	}
	if out == nil {
		return nil, fmt.Errorf("executor for %s returned no outcome", s.Kind)
	}
	sr.ExitCode, sr.Artifacts, sr.Results, sr.Reads = out.ExitCode, out.Artifacts, out.Results, out.Reads
	sr.Warnings = out.Warnings
	if out.Details != nil {
		sr.Details = mustJSON(out.Details)
	}
	return out, nil
}

// finishOutputs collects a passed step's declared outputs, has the output
// checker check an exec step's (checkOutputs), stores them in
// the build cache under key (when there is one) and copies or links them
// into the step directory.
func (e *run) finishOutputs(ctx context.Context, s *pipeline.Step, sc *step.Context, w *workTree, sr *StepRecord, out *step.Outcome, key string) error {
	files, err := collectOutputs(w, s.Outputs, out)
	if err != nil {
		sr.State, sr.Reason = runtypes.Failed, err.Error()
		return nil
	}
	if failed, err := e.checkOutputs(ctx, s, sc, sr, out, files); err != nil || failed {
		return err
	}
	sr.Outputs = files
	sr.State = runtypes.Passed
	if key != "" {
		if err := e.cache.store(key, w, files, sr); err != nil {
			sr.Notes = append(sr.Notes, "not cached: "+err.Error())
		} else if err := e.cache.linkOutputs(sc.StepDir, files); err == nil {
			return nil
		}
	}
	return copyOutputs(w, sc.StepDir, files)
}

func addImage(r *Record, im image.Pinned) {
	for _, x := range r.Images {
		if x.Name == im.Name {
			return
		}
	}
	r.Images = append(r.Images, im)
	sort.Slice(r.Images, func(i, j int) bool { return r.Images[i].Name < r.Images[j].Name })
}

// env builds a step's environment: on the host runner the base
// environment, on docker and bwrap only the variables of the base that
// passEnv names; then pipeline env, step env, and GPUATTEST_* facts.
// Signing secrets (pipeline.SigningSecret) never come from the base.
func (e *run) env(s *pipeline.Step, stepDir string, host bool) []string {
	m := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = v
	}
	base := e.o.baseEnv
	if base == nil {
		base = os.Environ()
	}
	pass := map[string]bool{}
	for _, n := range append(append([]string(nil), e.p.PassEnv...), s.PassEnv...) {
		pass[n] = true
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && (host || pass[k]) && !pipeline.SigningSecret(k) {
			set(k, v)
		}
	}
	for _, src := range []map[string]string{e.p.Env, s.Env} {
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(k, src[k])
		}
	}
	set("GPUATTEST_RUN_DIR", e.abs)
	set("GPUATTEST_STEP_DIR", stepDir)
	set("GPUATTEST_STEP_ID", s.ID)
	set("GPUATTEST_TARGETS", strings.Join(e.p.Targets, ","))
	if n := realGPUs(e.o.hardware); n > 0 {
		// The harness's --backend auto then refuses to fall back to the
		// CPU when CUDA fails: the machine has GPUs.
		set("GPUATTEST_EXPECT_GPU", strconv.Itoa(n))
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+m[k])
	}
	return out
}

// realGPUs counts the GPUs of a record of real (not simulated) hardware
// that NVML could open.
func realGPUs(hw *hardware.Record) int {
	if hw == nil || hw.Simulated {
		return 0
	}
	n := 0
	for _, g := range hw.GPUs {
		if g.Error == "" {
			n++
		}
	}
	return n
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}
