package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// DefaultProfileOutputs are the report globs a profile step without
// outputs: keeps (Nsight Compute and Nsight Systems reports).
var DefaultProfileOutputs = []string{"*.ncu-rep", "*.nsys-rep", "*.qdrep", "*.sqlite"}

// Profile executes profile steps: it runs the ncu or nsys command line and
// keeps the reports it wrote (the step's outputs globs, or
// DefaultProfileOutputs), each hashed in Outcome.Results. Reports older
// than the step are stale and not kept; a profile that leaves no fresh
// report fails.
type Profile struct{}

var _ step.Executor = Profile{}

// ProfileDetails is a profile step's facts (Outcome.Details).
type ProfileDetails struct {
	// Tool is the profiler the command runs (ncu, nsys) when recognised.
	Tool string `json:"tool,omitempty"`
	// Command is the command line.
	Command string `json:"command"`
	// Reports are the reports kept.
	Reports []step.File `json:"reports"`
	// Stale lists matching files older than the step, not kept.
	Stale []string `json:"stale,omitempty"`
}

// Execute runs the profile step s.Step.
func (Profile) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	start := time.Now().Add(-time.Second) // coarse file-system timestamps
	res, err := runStep(ctx, s)
	if err != nil {
		return nil, err
	}
	d := &ProfileDetails{Tool: profilerOf(s.Step.Run.Args()), Command: s.Step.Run.String()}
	out := &step.Outcome{ExitCode: exitPtr(res), Details: d, Status: step.Passed}
	globs := s.Step.Outputs
	if len(globs) == 0 {
		globs = DefaultProfileOutputs
	}
	var paths []string
	seen := map[string]bool{}
	for _, g := range globs {
		m, err := filepath.Glob(filepath.Join(s.WorkDir, filepath.FromSlash(g)))
		if err != nil {
			return nil, fmt.Errorf("step %s: outputs glob %q: %w", s.Step.ID, g, err)
		}
		for _, p := range m {
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		// Lstat: a symlink is no report of this step (the engine refuses
		// one that points out of the work dir).
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if st.ModTime().Before(start) {
			rel, _ := filepath.Rel(s.WorkDir, p)
			d.Stale = append(d.Stale, filepath.ToSlash(rel))
			continue
		}
		rel, err := filepath.Rel(s.WorkDir, p)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		sum, size, err := digest.File(p)
		if err != nil {
			return nil, err
		}
		d.Reports = append(d.Reports, step.File{Path: filepath.ToSlash(rel), SHA256: sum, Size: size, Kind: "profile"})
	}
	out.Results = d.Reports
	var why []string
	if res.ExitCode != 0 {
		why = append(why, fmt.Sprintf("profiler exited %d", res.ExitCode))
	}
	if len(d.Reports) == 0 {
		msg := fmt.Sprintf("no fresh report matches %s", strings.Join(globs, ", "))
		if len(d.Stale) > 0 {
			msg += fmt.Sprintf(" (%d stale from an earlier run; hint: ncu -f / nsys --force-overwrite true)", len(d.Stale))
		}
		why = append(why, msg)
	}
	if len(why) > 0 {
		out.Status, out.Reason = step.Failed, strings.Join(why, "; ")
	}
	return out, nil
}

// profilerOf names the profiler an argv runs, looking through a shell
// string's words too.
func profilerOf(args []string) string {
	words := args
	if len(args) == 3 && args[0] == "/bin/sh" {
		words = strings.Fields(args[2])
	}
	for _, w := range words {
		switch filepath.Base(w) {
		case "ncu", "nv-nsight-cu-cli":
			return "ncu"
		case "nsys":
			return "nsys"
		}
	}
	return ""
}
