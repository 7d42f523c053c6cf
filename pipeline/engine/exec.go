package engine

import (
	"context"
	"fmt"

	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Exec runs steps of kind exec: the step's command, passed when it exits 0.
type Exec struct{}

// ExecDetails are an exec step's facts (Outcome.Details), when its runner
// had something to say.
type ExecDetails struct {
	// RunnerNotes are the runner's notes (an image pulled, a copy mode).
	RunnerNotes []string `json:"runner_notes,omitempty"`
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
