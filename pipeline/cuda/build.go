package cuda

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Build is the executor of cuda-build steps.
type Build struct {
	// Jobs caps how many nvcc processes run at once; zero means one per CPU.
	Jobs int

	mu         sync.Mutex
	toolchains map[string]*Toolchain        // by runner, image, environment and flags
	imageEnvs  map[string]map[string]string // an image's nvcc variables, by image and environment
}

// memoKey names what a probe of s's toolchain depends on: the runner,
// the image, the environment nvcc runs with and the flags. Two steps of
// one run that agree on all of it find the same toolchain, so it is
// probed (a container started, for an image step) once.
func memoKey(s *step.Context, env []string) string {
	h := sha256.New()
	for _, kv := range env {
		h.Write([]byte(kv))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%T\x00%s\x00%x\x00%s", s.Runner, s.Image.ManifestDigest(), h.Sum(nil), strings.Join(s.Step.Flags, "\x00"))
}

var _ step.Executor = (*Build)(nil)

// BuildDetails are the facts of a cuda-build step, stored in run.json.
type BuildDetails struct {
	// Targets are the pinned targets, lowest first.
	Targets []string `json:"targets"`
	// Output is the artifact type.
	Output string `json:"output"`
	// PTX tells whether PTX for the highest target was embedded.
	PTX bool `json:"ptx"`
	// Commands are the exact nvcc invocations, in plan order.
	Commands []CommandRecord `json:"commands"`
	// ClearedEnv holds NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS as they were
	// in the step's environment before gpuattest cleared them.
	ClearedEnv map[string]string `json:"cleared_env,omitempty"`
	// Artifacts are the inspected outputs (paths relative to the work dir).
	Artifacts []*runtypes.Inspection `json:"artifacts"`
	// Problems are the step's spec problems when it was refused before
	// nvcc ran (see [pipeline.CheckCUDABuild]).
	Problems pipeline.Issues `json:"problems,omitempty"`
	// ArchProblems lists artifacts whose architectures differ from the
	// pinned set.
	ArchProblems []string `json:"arch_problems,omitempty"`
	// Reproducibility is the second build's comparison, when checked.
	Reproducibility *ReproReport `json:"reproducibility,omitempty"`
	// Toolchain is the fingerprint of the toolchain the step's runner
	// ran (in the step's image, for container runners); nil when it could
	// not be taken.
	Toolchain *Toolchain `json:"toolchain,omitempty"`
	// Timings are the wall times of the step's phases.
	Timings Timings `json:"timings"`
}

// Timings are the wall times of a cuda-build step's phases, in
// milliseconds.
type Timings struct {
	// BuildMS covers all nvcc jobs (run in parallel).
	BuildMS int64 `json:"build_ms"`
	// InspectMS covers cuobjdump on every artifact.
	InspectMS int64 `json:"inspect_ms"`
	// ReproMS covers the copy, second build and comparison.
	ReproMS int64 `json:"repro_ms,omitempty"`
}

// CommandRecord is one nvcc process as it ran.
type CommandRecord struct {
	// Source is the .cu file.
	Source string `json:"source"`
	// Argv is the exact argv.
	Argv []string `json:"argv"`
	// Line is Argv quoted for a POSIX shell.
	Line string `json:"line"`
	// ExitCode is nvcc's exit status.
	ExitCode int `json:"exit_code"`
	// DurationMS is its wall time in milliseconds.
	DurationMS int64 `json:"duration_ms"`
}

// Execute runs the cuda-build step s.Step: it checks the step, runs the
// planned nvcc jobs in parallel through s.Runner, inspects every artifact
// and fails unless its SASS (and PTX) architectures equal the pinned set,
// and with reproducible: check rebuilds in a copy under s.StepDir and
// fails when any output differs (report in steps/<id>/repro.json).
func (b *Build) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	st := s.Step
	idx := StepIndex(s.Pipeline, st)
	if idx < 0 {
		return nil, fmt.Errorf("cuda-build: step %q is not in the pipeline", st.ID)
	}
	if is := pipeline.CheckCUDABuild(s.Pipeline, idx); len(is) > 0 {
		return &step.Outcome{Status: step.Failed, Reason: is[0].Path + ": " + is[0].Message, Details: &BuildDetails{Targets: s.Pipeline.Targets, Output: st.Output, Problems: is, Artifacts: []*runtypes.Inspection{}}}, nil
	}
	targets, err := pipeline.ParseTargets(s.Pipeline.Targets)
	if err != nil {
		return nil, err
	}
	jobs, err := plan(st, targets)
	if err != nil {
		return nil, err
	}
	det := &BuildDetails{Targets: smNames(targets), Output: st.Output, PTX: st.PTX == nil || *st.PTX, Artifacts: []*runtypes.Inspection{}}
	if det.Output == "" {
		det.Output = pipeline.OutputFatbin
	}
	env, cleared, err := b.nvccEnv(ctx, s)
	if err != nil {
		return nil, err
	}
	det.ClearedEnv = cleared
	for k, v := range cleared {
		s.Logger.Warn("cleared nvcc environment variable", "step", st.ID, "var", k, "value", v)
	}
	if out, err := b.build(ctx, s, idx, env, jobs, det); out != nil || err != nil {
		return out, err
	}
	det.Toolchain = b.fingerprint(ctx, s, env)
	reads, err := b.reads(ctx, s, env, jobs)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// Without the list of files the build read, nothing can say
		// what its artifacts were built from.
		return &step.Outcome{Status: step.Failed, Reason: err.Error(), Details: det}, nil
	}
	out, err := b.inspectOutputs(ctx, s, env, jobs, targets, det)
	if out != nil {
		out.Reads = reads
	}
	if err != nil || out.Status == step.Failed || st.Reproducible != "check" {
		return out, err
	}
	if err := b.reproduce(ctx, s, env, jobs, det, out); err != nil {
		return nil, err
	}
	return out, nil
}

// build runs the nvcc jobs of step idx, recording them in det. It returns
// a failed outcome when a source is missing or nvcc fails, and nil when
// every job succeeded.
func (b *Build) build(ctx context.Context, s *step.Context, idx int, env []string, jobs []Job, det *BuildDetails) (*step.Outcome, error) {
	for _, src := range s.Step.Sources {
		if _, err := os.Stat(filepath.Join(s.WorkDir, filepath.FromSlash(src))); err != nil {
			return &step.Outcome{Status: step.Failed, Reason: fmt.Sprintf("steps[%d].sources: %v", idx, err), Details: det}, nil
		}
	}
	t0 := time.Now()
	recs, failed, err := RunJobs(ctx, s.Runner, s.WorkDir, jobs, RunOptions{Env: env, Image: s.Image, Parallel: b.Jobs, Stdout: s.Stdout, Stderr: s.Stderr})
	det.Commands = recs
	det.Timings.BuildMS = time.Since(t0).Milliseconds()
	if err != nil {
		return nil, err
	}
	if failed >= 0 {
		code := recs[failed].ExitCode
		return &step.Outcome{Status: step.Failed, ExitCode: &code, Reason: fmt.Sprintf("nvcc exited %d compiling %s (see stderr.log)", code, recs[failed].Source), Details: det}, nil
	}
	return nil, nil
}

// StepIndex returns the index of s in p.Steps (by identity, then by id),
// or -1.
func StepIndex(p *pipeline.Pipeline, s *pipeline.Step) int {
	if p == nil || s == nil {
		return -1
	}
	for i := range p.Steps {
		if &p.Steps[i] == s {
			return i
		}
	}
	for i := range p.Steps {
		if p.Steps[i].ID == s.ID {
			return i
		}
	}
	return -1
}

// fingerprint is the fingerprint of the toolchain s's runner runs (in
// s.Image), taken once per runner, image and flags; nil, with a warning
// in the log, when it cannot be taken.
func (b *Build) fingerprint(ctx context.Context, s *step.Context, env []string) *Toolchain {
	key := memoKey(s, env)
	b.mu.Lock()
	defer b.mu.Unlock()
	if tc, ok := b.toolchains[key]; ok {
		return tc
	}
	var err error
	if s.StepDir != "" {
		err = os.MkdirAll(s.StepDir, 0o755)
	}
	var tc *Toolchain
	if err == nil {
		tc, err = Fingerprint(ctx, s.Runner, WithEnv(env), WithImage(s.Image), WithTempDir(s.StepDir), WithNVCCFlags(s.Step.Flags))
	}
	if err != nil {
		s.Logger.Warn("could not fingerprint the toolchain", "step", s.Step.ID, "err", err)
		return nil
	}
	if b.toolchains == nil {
		b.toolchains = map[string]*Toolchain{}
	}
	b.toolchains[key] = tc
	return tc
}
