package cuda

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// reproduce runs the reproducibility check of a built step and records it
// in det; out fails when an output differs between the two builds.
func (b *Build) reproduce(ctx context.Context, s *step.Context, env []string, jobs []Job, det *BuildDetails, out *step.Outcome) error {
	t0 := time.Now()
	rep, err := b.checkReproducible(ctx, s, env, jobs)
	det.Timings.ReproMS = time.Since(t0).Milliseconds()
	if err != nil {
		return fmt.Errorf("reproducibility check: %w", err)
	}
	det.Reproducibility = rep
	if !rep.Reproducible {
		var names []string
		for _, d := range rep.Differing {
			names = append(names, d.Path)
		}
		out.Status = step.Failed
		out.Reason = fmt.Sprintf("not reproducible: %s differ between two builds (see repro.json)", strings.Join(names, ", "))
	}
	return nil
}

// reproDir makes a fresh directory for a second build under the step's
// directory (or the system's temporary directory when it has none); the
// caller removes it.
func reproDir(s *step.Context) (string, error) {
	base := s.StepDir
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(base, "repro-")
}

// compareRecorded compares the outputs of the step's build with those of
// the second build in second (CompareBuilds) and writes the report to the
// step's directory (runlayout.ReproFile), for both reproducibility checks.
func compareRecorded(s *step.Context, second string, outputs []string) (*ReproReport, error) {
	rep, err := CompareBuilds(s.WorkDir, second, outputs)
	if err != nil {
		return nil, err
	}
	if s.StepDir == "" {
		return rep, nil
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(s.StepDir, runlayout.ReproFile), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

// checkReproducible copies the work dir's sources into a fresh directory
// under the step dir, runs the same jobs there and compares every output.
func (b *Build) checkReproducible(ctx context.Context, s *step.Context, env []string, jobs []Job) (*ReproReport, error) {
	tmp, err := reproDir(s)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	second := filepath.Join(tmp, "src")
	var outputs []string
	for _, j := range jobs {
		outputs = append(outputs, j.Outputs...)
	}
	if err := copyTree(s.WorkDir, second, reproSkips(s, tmp, outputs)); err != nil {
		return nil, fmt.Errorf("copying sources for the second build: %w", err)
	}
	var log bytes.Buffer
	recs, failed, err := RunJobs(ctx, s.Runner, second, jobs, RunOptions{Env: env, Image: s.Image, Parallel: b.Jobs, Stdout: &log, Stderr: &log})
	if err != nil {
		return nil, err
	}
	if failed >= 0 {
		return nil, fmt.Errorf("second build: nvcc exited %d compiling %s:\n%s", recs[failed].ExitCode, recs[failed].Source, log.String())
	}
	rep, err := compareRecorded(s, second, outputs)
	if err != nil {
		return nil, err
	}
	if s.Stdout != nil {
		fmt.Fprintf(s.Stdout, "# reproducibility check (second build in %s)\n%s\n", second, rep.Summary())
	}
	for _, d := range rep.Differing {
		s.Logger.Warn("build output differs between two builds", "step", s.Step.ID, "diff", d.Summary())
	}
	return rep, nil
}

// reproSkips lists what the copy for the second build leaves out: the
// copy itself (tmp), the step and run directories, and the first build's
// outputs.
func reproSkips(s *step.Context, tmp string, outputs []string) []string {
	skip := []string{tmp, s.StepDir}
	if runlayout.InStepsDir(s.StepDir) {
		skip = append(skip, filepath.Dir(filepath.Dir(s.StepDir))) // the whole run directory
	}
	for _, o := range outputs {
		skip = append(skip, filepath.Join(s.WorkDir, filepath.FromSlash(o)))
	}
	return skip
}

// maxCopyBytes bounds the work dir copy of a reproducibility check.
const maxCopyBytes = 1 << 30

// copyTree copies the regular files and directories of src into dst,
// skipping hidden directories (.git, .cache, ...), the paths in skip and
// anything under them; symlinks are recreated as symlinks.
func copyTree(src, dst string, skip []string) error {
	// A work dir reached through a symlink (pipelines/kernels -> ../kernels)
	// is walked at its real path; skip paths are resolved the same way.
	src = resolve(src)
	for i := range skip {
		skip[i] = resolve(skip[i])
	}
	var total int64
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if s != "" && p == s {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() && p != src && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
			if total > maxCopyBytes {
				return fmt.Errorf("work dir %s holds more than %d bytes\nhint: give the cuda-build step its own workdir holding only its sources", src, maxCopyBytes)
			}
			return copyFile(p, target, info.Mode().Perm())
		}
		return nil
	})
}

// resolve returns p with symlinks evaluated, or p when that fails.
func resolve(p string) string {
	if p == "" {
		return p
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
