package cuda

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// maxReproLog bounds the second build's log kept for the step's stdout.
const maxReproLog = 1 << 20

// reproduceExec checks an exec step with reproducible: check: it copies
// the step's work dir (without the run directory and the first build's
// outputs) under the step directory, runs the step's command again
// there, and compares each output of the first build with the second's
// byte for byte (CompareBuilds: the differing ELF sections and strings).
// The report is written to the step's repro.json and its summary to the
// step's stdout. An error says why the second build could not be made.
func reproduceExec(ctx context.Context, s *step.Context, outputs []step.File) (*ReproReport, error) {
	tmp, err := reproDir(s)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	second := filepath.Join(tmp, "src")
	var rels []string
	for _, o := range outputs {
		if o.Link == "" {
			rels = append(rels, o.Path)
		}
	}
	if err := copyTree(s.WorkDir, second, reproSkips(s, tmp, rels)); err != nil {
		return nil, fmt.Errorf("copying the work dir for the second build: %w", err)
	}
	var log bytes.Buffer
	res, err := s.Runner.Run(ctx, &runner.Command{Args: s.Step.Run.Args(), Dir: second, Env: s.Env,
		Stdout: &capped{w: &log, n: maxReproLog}, Stderr: &capped{w: &log, n: maxReproLog}, Image: s.Image, GPU: s.Step.GPU})
	if err != nil {
		return nil, fmt.Errorf("second build: %w", err)
	}
	if s.Stdout != nil {
		fmt.Fprintf(s.Stdout, "# reproducibility check: second build in %s\n%s", second, log.String())
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("second build (in %s) exited %d", second, res.ExitCode)
	}
	for _, o := range rels {
		if _, err := os.Lstat(filepath.Join(second, filepath.FromSlash(o))); err != nil {
			return nil, fmt.Errorf("the second build wrote no %s", o)
		}
	}
	rep, err := compareRecorded(s, second, rels)
	if err != nil {
		return nil, err
	}
	if s.Stdout != nil {
		fmt.Fprintf(s.Stdout, "%s\n", rep.Summary())
	}
	return rep, nil
}

// reproProblem says which outputs differ, and in which ELF sections.
func reproProblem(rep *ReproReport) string {
	var parts []string
	for _, d := range rep.Differing {
		p := d.Path
		var secs []string
		for _, sd := range d.Sections {
			secs = append(secs, sd.Name)
		}
		if len(secs) > 0 {
			p += " (ELF sections " + strings.Join(secs, ", ") + ")"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("not reproducible: %s differ between two builds (see repro.json)\nhint: outputs that embed the time (__DATE__, __TIME__), the build directory or a process id differ; nvcc host binaries embed tmpxft_<pid> names, fatbins do not", strings.Join(parts, "; "))
}

// capped writes to w until n bytes have been written, then drops the
// rest (saying so once).
type capped struct {
	w       *bytes.Buffer
	n       int
	dropped bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.n - c.w.Len(); room < len(p) {
		if room > 0 {
			c.w.Write(p[:room])
		}
		if !c.dropped {
			c.dropped = true
			c.w.WriteString("\n[second build's log truncated]\n")
		}
		return len(p), nil
	}
	return c.w.Write(p)
}
