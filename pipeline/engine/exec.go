package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Exec runs steps of kind exec: the step's command, passed when it exits 0.
type Exec struct{}

// ExecDetails are an exec step's facts (Outcome.Details), when its runner
// had something to say.
type ExecDetails struct {
	// RunnerNotes are the runner's notes (an image pulled, a copy mode).
	RunnerNotes []string `json:"runner_notes,omitempty"`
	// Outputs are the output checker's facts (WithOutputChecker), as it
	// wrote them.
	Outputs json.RawMessage `json:"outputs,omitempty"`
}

var _ step.Executor = Exec{}

// Execute runs s.Step.Run through s.Runner.
func (Exec) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	res, err := s.Runner.Run(ctx, &runner.Command{
		Args:   s.Step.Run.Args(),
		Dir:    s.WorkDir,
		Env:    s.Env,
		Stdout: s.Stdout,
		Stderr: s.Stderr,
		Image:  s.Image,
		GPU:    s.Step.GPU,
	})
	if err != nil {
		return nil, err
	}
	code := res.ExitCode
	out := &step.Outcome{Status: step.Passed, ExitCode: &code}
	if len(res.Notes) > 0 {
		out.Details = &ExecDetails{RunnerNotes: res.Notes}
	}
	if code != 0 {
		out.Status, out.Reason = step.Failed, fmt.Sprintf("exit status %d", code)
	}
	return out, nil
}

// checkOutputs runs the output checker on the outputs files of a passed
// exec step, records what it found in sr and reports whether it failed
// the step.
func (e *run) checkOutputs(ctx context.Context, s *pipeline.Step, sc *step.Context, sr *StepRecord, out *step.Outcome, files []step.File) (bool, error) {
	if e.o.outputs == nil || s.Kind != pipeline.KindExec || len(files) == 0 {
		return false, nil
	}
	chk, err := e.o.outputs.CheckOutputs(ctx, sc, files)
	if err != nil {
		return false, err
	}
	d, _ := out.Details.(*ExecDetails)
	if d == nil {
		d = &ExecDetails{}
	}
	d.Outputs = mustJSON(chk.Details)
	sr.Details = mustJSON(d)
	sr.Artifacts = chk.Artifacts
	if len(chk.Problems) == 0 {
		return false, nil
	}
	sr.State, sr.Reason = runtypes.Failed, chk.Problems[0]
	if n := len(chk.Problems) - 1; n > 0 {
		sr.Reason += fmt.Sprintf(" (and %d more problem(s): see the step's outputs in run.json)", n)
	}
	return true, nil
}
