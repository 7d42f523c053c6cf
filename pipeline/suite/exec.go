package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/internal/digest"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// runStep runs the step's command once through its runner with extra
// environment variables set on top of s.Env.
func runStep(ctx context.Context, s *step.Context, extra ...string) (*runner.Result, error) {
	return runCommand(ctx, s, s.Step.Run, extra...)
}

// runCommand runs cmd once as the step would run its own: same runner,
// work dir, image, GPU access and environment, plus extra.
func runCommand(ctx context.Context, s *step.Context, cmd pipeline.Command, extra ...string) (*runner.Result, error) {
	args := cmd.Args()
	if len(args) == 0 {
		return nil, fmt.Errorf("step %s: run is empty", s.Step.ID)
	}
	return s.Runner.Run(ctx, &runner.Command{
		Args:   args,
		Dir:    s.WorkDir,
		Env:    setEnv(s.Env, extra...),
		Stdout: s.Stdout,
		Stderr: s.Stderr,
		Image:  s.Image,
		GPU:    s.Step.GPU,
	})
}

// setEnv returns env with each KEY=VALUE of kv replacing any earlier KEY.
func setEnv(env []string, kv ...string) []string {
	out := make([]string, 0, len(env)+len(kv))
	override := map[string]bool{}
	for _, e := range kv {
		k, _, _ := strings.Cut(e, "=")
		override[k] = true
	}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if !override[k] {
			out = append(out, e)
		}
	}
	return append(out, kv...)
}

// resultsPath is the absolute path of the step's results file.
func resultsPath(s *step.Context) (string, error) {
	return workPath(s, s.Step.Results, "results")
}

// workPath is the absolute path of a file the step names relative to its
// work dir (what says which field, for the error).
func workPath(s *step.Context, rel, what string) (string, error) {
	if rel == "" {
		return "", fmt.Errorf("step %s: no %s file declared\nhint: add results: out/results.json (the file the command writes)", s.Step.ID, what)
	}
	if filepath.IsAbs(rel) {
		return rel, nil
	}
	return filepath.Join(s.WorkDir, filepath.FromSlash(rel)), nil
}

// removeStale deletes a results file left by an earlier run so that a
// command that writes nothing cannot pass on old results.
func removeStale(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale results %s: %w", path, err)
	}
	return nil
}

// workFile describes a file under the work dir by its workdir-relative path.
func workFile(s *step.Context, abs, kind string) (step.File, error) {
	sum, size, err := digest.File(abs)
	if err != nil {
		return step.File{}, err
	}
	rel, err := filepath.Rel(s.WorkDir, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = abs
	}
	return step.File{Path: filepath.ToSlash(rel), SHA256: sum, Size: size, Kind: kind}, nil
}

// stepFile describes a file in the step directory. Its Path is relative
// to the run directory (steps/<id>/name), the parent of steps/.
func stepFile(s *step.Context, abs, kind string) (step.File, error) {
	sum, size, err := digest.File(abs)
	if err != nil {
		return step.File{}, err
	}
	runDir := filepath.Dir(filepath.Dir(s.StepDir))
	rel, err := filepath.Rel(runDir, abs)
	if err != nil {
		rel = abs
	}
	return step.File{Path: filepath.ToSlash(rel), SHA256: sum, Size: size, Kind: kind}, nil
}

// writeStepFile writes name into the step directory atomically.
func writeStepFile(s *step.Context, name, kind string, fill func(io.Writer) error) (step.File, error) {
	if err := os.MkdirAll(s.StepDir, 0o755); err != nil {
		return step.File{}, err
	}
	p := filepath.Join(s.StepDir, name)
	if err := atomicfile.WriteFrom(p, 0o644, fill); err != nil {
		return step.File{}, err
	}
	return stepFile(s, p, kind)
}

// copyToStep copies src into the step directory as name.
func copyToStep(s *step.Context, src, name, kind string) (step.File, error) {
	if err := os.MkdirAll(s.StepDir, 0o755); err != nil {
		return step.File{}, err
	}
	p := filepath.Join(s.StepDir, name)
	if err := atomicfile.Copy(p, src); err != nil {
		return step.File{}, err
	}
	return stepFile(s, p, kind)
}

func resultsKind(r *Results) string {
	if r.Format == FormatJUnit {
		return "junit"
	}
	return "results"
}

func exitPtr(res *runner.Result) *int {
	if res == nil {
		return nil
	}
	c := res.ExitCode
	return &c
}
