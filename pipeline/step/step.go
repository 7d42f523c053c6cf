// Package step is the contract between the run engine and the executors
// of each step kind (exec, cuda-build, test, benchmark, burnin, profile).
// Adding a kind is a new Executor plus its entry in pipeline's kind table.
package step

import (
	"context"
	"fmt"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// Executor runs the steps of one kind.
type Executor interface {
	// Execute runs s.Step. It returns an Outcome for any result the step
	// itself produced (passed or failed) and an error only when the step
	// could not be carried out (the engine records that as "error").
	Execute(ctx context.Context, s *Context) (*Outcome, error)
}

// Context is everything an executor gets for one step.
type Context struct {
	// Pipeline is the whole validated pipeline (targets, images, release).
	Pipeline *pipeline.Pipeline
	// Step is the step to run.
	Step *pipeline.Step
	// Runner runs the step's processes.
	Runner runner.Runner
	// Image is the step's image pinned to its digests (image.Pinner); the
	// zero value on host.
	Image image.Pinned
	// Root is the pipeline's root (its workdir), absolute with symlinks
	// resolved: every path the step names stays inside it. Executors
	// read, write and remove the files a step names through an os.Root
	// of it (see RootRel and FileRel), never by following a path out.
	Root string
	// WorkDir is the absolute directory the step runs in (the root joined
	// with the step's workdir, symlinks resolved, inside Root).
	WorkDir string
	// StepDir is the absolute path of the step's directory in the run
	// directory (steps/<id>/); executors write reports and copies of
	// results here.
	StepDir string
	// Env is the step's full environment (KEY=VALUE).
	Env []string
	// Stdout and Stderr are the step's logs (steps/<id>/stdout.log, ...).
	Stdout, Stderr io.Writer
	// Logger receives diagnostics; never nil.
	Logger *slog.Logger
	// Hardware is the run's hardware record; nil when none was collected.
	Hardware *hardware.Record
	// Progress, when set, receives how far the step has come, for a live
	// display (Report calls it). What it gets never reaches run.json, a
	// log or a results file.
	Progress func(runtypes.Progress)
}

// Report passes p to c.Progress, when set.
func (c *Context) Report(p runtypes.Progress) {
	if c.Progress != nil {
		c.Progress(p)
	}
}

// Status is a step's final state as an executor reports it.
type Status string

// The final states an executor may report.
const (
	Passed Status = "passed"
	Failed Status = "failed"
)

// Outcome is what a step produced.
type Outcome struct {
	// Status is Passed or Failed.
	Status Status
	// ExitCode is the main process's exit code, when there was one.
	ExitCode *int
	// Reason says why a failed step failed, in one line.
	Reason string
	// Details are the kind's facts, stored under the step in run.json
	// (build facts, results summary, benchmark stats, ...).
	Details any
	// Artifacts are released files (fatbins, cubins): attestation subjects.
	Artifacts []File
	// Results are result files (results JSON, JUnit, reports) whose
	// sha256 the attestation binds.
	Results []File
	// DeviceUUID is the GPU the step's results say it ran on ("GPU-..."),
	// when they name one: telemetry judges that GPU only.
	DeviceUUID string
	// Warnings are what a passed step wants its reader not to miss (an
	// AMBIGUOUS gate verdict under gate.onAmbiguous: warn): the run then
	// passes with warnings.
	Warnings []string
	// Reads are the files the step's tools reported reading (nvcc's
	// dependency output for a cuda-build step), hashed when the step
	// ended. The build cache restores the step only while every one of
	// them still has its digest.
	Reads []Read
}

// Read is a file a step's tool read.
type Read struct {
	// Path is slash-separated and relative to Context.WorkDir for a file
	// inside it; absolute for any other file.
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file's bytes as the step ended;
	// empty for a file inside the step's container image, which the
	// image's digest already pins.
	SHA256 string `json:"sha256,omitempty"`
	// InImage is true for an absolute path read inside the step's image.
	InImage bool `json:"in_image,omitempty"`
}

// KeyFacter is implemented by executors whose outputs depend on facts
// beyond the step's spec and declared inputs, such as the toolchain its
// runner finds: the build cache key covers what CacheKeyFacts returns
// (encoded as JSON). An error leaves the step uncached.
type KeyFacter interface {
	CacheKeyFacts(ctx context.Context, sc *Context) (any, error)
}

// File is a file the step produced, by path relative to the step's work
// dir and digest.
type File struct {
	// Path is relative to Context.WorkDir (slash-separated).
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file's bytes.
	SHA256 string `json:"sha256"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Kind says what the file is ("fatbin", "cubin", "results", "junit", ...).
	Kind string `json:"kind,omitempty"`
	// Link is the target of a symbolic link as written, for an output or
	// input recorded as a link (never followed; it points inside the
	// work dir); SHA256 and Size are then those of the target's text.
	Link string `json:"link,omitempty"`
	// Mode is the permission bits of a regular file as the step left it
	// (outputs): copies keep them, minus the write bits, and never widen
	// them.
	Mode uint32 `json:"mode,omitempty"`
}

// ReadOnly returns the permission bits copies of f get: f's own, minus
// write (0444 when f's are unknown).
func (f File) ReadOnly() os.FileMode {
	if f.Mode == 0 {
		return 0o444
	}
	return os.FileMode(f.Mode).Perm() &^ 0o222
}

// root is Root, or for a context built by hand without one, WorkDir.
func (c *Context) root() string {
	if c.Root != "" {
		return c.Root
	}
	return c.WorkDir
}

// RootRel returns name, a path a step names relative to its work dir,
// as a path relative to Root (to use with os.OpenRoot(Root)). An absolute
// name, or one that leaves the work dir, is an error that says so; field
// names the step field for the message (e.g. "results").
func (c *Context) RootRel(field, name string) (string, error) {
	n := filepath.FromSlash(name)
	if filepath.IsAbs(n) || !local(n) {
		return "", fmt.Errorf("step %s: %s %q is outside the step's workdir %s\nhint: a step's paths are relative to its workdir and stay inside it", c.Step.ID, field, name, c.WorkDir)
	}
	wd, err := filepath.Rel(c.root(), c.WorkDir)
	if err != nil || !local(wd) {
		return "", fmt.Errorf("step %s: work dir %s is outside the pipeline's root %s", c.Step.ID, c.WorkDir, c.root())
	}
	return filepath.Join(wd, n), nil
}

// FileRel returns name, a path relative to the pipeline file's directory
// (as baseline is), as a path relative to Root. An absolute name, or one
// that leaves the root, is an error that says so.
func (c *Context) FileRel(field, name string) (string, error) {
	n := filepath.FromSlash(name)
	fail := func() (string, error) {
		return "", fmt.Errorf("step %s: %s %q is outside the pipeline's root %s\nhint: give a path relative to the pipeline file, inside the pipeline's root (its workdir)", c.Step.ID, field, name, c.root())
	}
	if filepath.IsAbs(n) {
		return fail()
	}
	p := c.Pipeline
	if p == nil || p.Dir == "" {
		// No pipeline file: relative to the work dir.
		return c.RootRel(field, name)
	}
	lexRoot := p.Root
	if lexRoot == "" {
		lexRoot = p.Dir
	}
	rel, err := filepath.Rel(lexRoot, filepath.Join(p.Dir, n))
	if err != nil || !local(rel) {
		return fail()
	}
	return rel, nil
}

// local reports whether the relative path p stays at or below the
// directory it is relative to.
func local(p string) bool {
	c := filepath.Clean(p)
	return c == "." || filepath.IsLocal(c)
}

// OutputChecker checks the files a step released once the engine has
// collected its outputs (the device code in an exec step's outputs,
// against the pinned targets). The engine calls it for exec steps that
// passed and declared outputs.
type OutputChecker interface {
	CheckOutputs(ctx context.Context, sc *Context, outputs []File) (*OutputCheck, error)
}

// OutputCheck is what an OutputChecker found.
type OutputCheck struct {
	// Details are the checker's facts, stored in run.json under the
	// step's details as "outputs".
	Details any
	// Artifacts are the outputs as released files (attestation
	// subjects), each with its kind.
	Artifacts []File
	// Problems fail the step, each naming the file and what is wrong.
	Problems []string
}
