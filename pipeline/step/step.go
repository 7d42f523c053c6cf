// Package step is the contract between the run engine and the executors
// of each step kind (exec, cuda-build, test, benchmark, burnin, profile).
// Adding a kind is a new Executor plus its entry in pipeline's kind table.
package step

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"

	"github.com/gpuattest/gpuattest/pipeline"
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
	// Image is the step's image as name@sha256:digest, empty on host.
	Image string
	// WorkDir is the absolute directory the step runs in (pipeline dir
	// joined with the step's workdir).
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
	// Hardware is the run's hardware record as JSON (see pipeline/gpu);
	// executors that gate on hardware decode it.
	Hardware json.RawMessage
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
}
