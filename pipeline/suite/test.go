package suite

import (
	"context"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Test executes test steps. A test passes only when its command exits 0
// AND its results file exists, parses, holds at least one case and no case
// failed or errored. A missing or invalid results file is an error (the
// engine records the step as errored); skipped cases are counted and
// reported, never silently passed.
type Test struct{}

var _ step.Executor = Test{}

// TestDetails is a test step's facts (Outcome.Details).
type TestDetails struct {
	// Results is the results file as the step names it; Format how it was read.
	Results string `json:"results"`
	Format  string `json:"format"`
	// Tool, Backend and Device come from a gpuattest results file.
	Tool    string `json:"tool,omitempty"`
	Backend string `json:"backend,omitempty"`
	Device  string `json:"device,omitempty"`
	// DeviceUUID and CUDAVisibleDevices are the GPU the cases ran on and
	// CUDA_VISIBLE_DEVICES as the suite saw it, when its results say.
	DeviceUUID         string `json:"device_uuid,omitempty"`
	CUDAVisibleDevices string `json:"cuda_visible_devices,omitempty"`
	// Counts tallies the cases.
	Counts Counts `json:"counts"`
	// Failures lists the cases that failed or errored, with their message.
	Failures []CaseStatus `json:"failures,omitempty"`
	// Skipped lists the skipped cases, with their reason.
	Skipped []CaseStatus `json:"skipped,omitempty"`
	// Coverage are the coverage reports the step named, with their
	// totals.
	Coverage []CoverageFile `json:"coverage,omitempty"`
}

// CaseStatus names a case with its status and message.
type CaseStatus struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Execute runs the test step s.Step.
func (Test) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	resFile, err := resultsFile(s)
	if err != nil {
		return nil, err
	}
	if err := resFile.remove(); err != nil {
		return nil, err
	}
	covFiles, err := coverageFiles(s)
	if err != nil {
		return nil, err
	}
	for _, f := range covFiles {
		if err := f.remove(); err != nil {
			return nil, err
		}
	}
	res, err := runStep(ctx, s)
	if err != nil {
		return nil, err
	}
	out := &step.Outcome{ExitCode: exitPtr(res)}
	r, b, err := readResults(resFile, s.Step.Format)
	if err != nil {
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("command exited %d and left no usable results: %w", res.ExitCode, err)
		}
		return nil, err
	}
	out.Results = append(out.Results, resFile.file(b, resultsKind(r)))
	out.DeviceUUID = r.DeviceUUID
	if _, err := writeBytesToStep(s, "results"+filepath.Ext(resFile.rel), resultsKind(r), b); err != nil {
		return nil, err
	}
	d, status, reason, err := judgeTest(s.Step, r, res.ExitCode)
	if err != nil {
		return nil, err
	}
	out.Details, out.Status, out.Reason = d, status, reason
	cov, why, err := readCoverage(s, covFiles, out)
	if err != nil {
		return nil, err
	}
	d.Coverage = cov
	if why != "" && status == step.Passed {
		out.Status, out.Reason = step.Failed, why
	}
	return out, nil
}

// judgeTest is a test step's verdict on results r of a command that
// exited with exitCode: passed only when every case that ran passed, at
// least one case ran, and the command exited 0.
func judgeTest(st *pipeline.Step, r *Results, exitCode int) (*TestDetails, step.Status, string, error) {
	d := &TestDetails{Results: st.Results, Format: r.Format, Tool: r.Tool, Backend: r.Backend, Device: r.Device,
		DeviceUUID: r.DeviceUUID, CUDAVisibleDevices: r.CUDAVisibleDevices, Counts: r.Count()}
	if r.Format == FormatJUnit {
		d.Tool = ""
	}
	for _, c := range r.Cases {
		switch c.Status {
		case StatusFailed, StatusError:
			d.Failures = append(d.Failures, CaseStatus{c.Name, c.Status, c.Message})
		case StatusSkipped:
			d.Skipped = append(d.Skipped, CaseStatus{c.Name, c.Status, c.Message})
		}
	}
	if d.Counts.Total == 0 {
		return nil, "", "", fmt.Errorf("results %s hold no case: a test passes on its results, never on the exit code alone\nhint: check that the suite found its tests", st.Results)
	}
	c := d.Counts
	summary := fmt.Sprintf("%d cases: %d passed, %d failed, %d errored, %d skipped", c.Total, c.Passed, c.Failed, c.Errored, c.Skipped)
	var why []string
	if exitCode != 0 {
		why = append(why, fmt.Sprintf("command exited %d", exitCode))
	}
	if len(d.Failures) > 0 {
		var names []string
		for i, f := range d.Failures {
			if i == 3 {
				names = append(names, fmt.Sprintf("and %d more", len(d.Failures)-3))
				break
			}
			n := f.Name + " " + f.Status
			if f.Message != "" {
				n += ": " + firstLine(f.Message)
			}
			names = append(names, n)
		}
		why = append(why, strings.Join(names, "; "))
	}
	if c.Passed == 0 && len(why) == 0 {
		why = append(why, "every case was skipped: nothing was tested")
	}
	if len(why) > 0 {
		return d, step.Failed, summary + " (" + strings.Join(why, "; ") + ")", nil
	}
	return d, step.Passed, summary, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
