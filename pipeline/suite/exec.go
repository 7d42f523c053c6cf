package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/internal/limits"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

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
	return runCommandWith(ctx, s, cmd, nil, extra...)
}

// runCommandWith is runCommand with readOnly, absolute host paths that
// container runners bind read-only at the same path.
func runCommandWith(ctx context.Context, s *step.Context, cmd pipeline.Command, readOnly []string, extra ...string) (*runner.Result, error) {
	args := cmd.Args()
	if len(args) == 0 {
		return nil, fmt.Errorf("step %s: run is empty", s.Step.ID)
	}
	return s.Runner.Run(ctx, &runner.Command{
		Args:     args,
		Dir:      s.WorkDir,
		Env:      setEnv(s.Env, extra...),
		Stdout:   s.Stdout,
		Stderr:   s.Stderr,
		Image:    s.Image,
		GPU:      s.Step.GPU,
		ReadOnly: readOnly,
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

// rootedFile is a file a step names, reached through an os.Root of the
// pipeline's root: reading or removing it never follows a path, or a
// symlink, out of the root.
type rootedFile struct {
	root string // the root directory
	rel  string // the file, relative to root
	name string // the file as the step names it (slash-separated, clean)
	abs  string // root joined with rel, for messages
}

// resultsFile is the step's results file.
func resultsFile(s *step.Context) (*rootedFile, error) {
	return namedResultsFile(s, "results", s.Step.Results)
}

// namedResultsFile is a results file the step names in field (results,
// reference.results), relative to its workdir and inside the root.
func namedResultsFile(s *step.Context, field, r string) (*rootedFile, error) {
	if r == "" {
		return nil, fmt.Errorf("step %s: no %s file declared\nhint: add results: out/results.json (the file the command writes)", s.Step.ID, field)
	}
	rel, err := s.RootRel(field, r)
	if err != nil {
		return nil, err
	}
	return newRootedFile(s, rel, path.Clean(filepath.ToSlash(r))), nil
}

func newRootedFile(s *step.Context, rel, name string) *rootedFile {
	root := s.Root
	if root == "" {
		root = s.WorkDir
	}
	return &rootedFile{root: root, rel: rel, name: name, abs: filepath.Join(root, rel)}
}

// remove deletes a results file left by an earlier run so that a command
// that writes nothing cannot pass on old results.
func (f *rootedFile) remove() error {
	r, err := os.OpenRoot(f.root)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Remove(f.rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale results %s: %w", f.abs, err)
	}
	return nil
}

// read returns the file's bytes. It must be a regular file inside the
// root (a symlink may lead there, never out); a FIFO or a device is
// refused rather than waited on.
func (f *rootedFile) read() ([]byte, error) {
	r, err := os.OpenRoot(f.root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h, err := r.OpenFile(f.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && strings.Contains(err.Error(), "escapes") {
			return nil, fmt.Errorf("%s leads outside the pipeline's root %s (through a symlink)\nhint: gpuattest reads a step's files only inside the root", f.abs, f.root)
		}
		return nil, err
	}
	defer h.Close()
	st, err := h.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is a %s, not a regular file", f.abs, st.Mode().Type())
	}
	return limits.ReadAll(h, limits.ResultsBytes, f.abs, "results file")
}

// file describes the bytes b, read from f, by f's name.
func (f *rootedFile) file(b []byte, kind string) step.File {
	sum := sha256.Sum256(b)
	return step.File{Path: f.name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b)), Kind: kind}
}

// readResults reads and parses the step's results file.
func readResults(f *rootedFile, format string) (*Results, []byte, error) {
	b, err := f.read()
	if err != nil {
		return nil, nil, readResultsError(f.abs, err)
	}
	r, err := parseResults(f.abs, b, format)
	return r, b, err
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

// writeBytesToStep writes b into the step directory as name, described
// from b (the copy is not read back).
func writeBytesToStep(s *step.Context, name, kind string, b []byte) (step.File, error) {
	if err := os.MkdirAll(s.StepDir, 0o755); err != nil {
		return step.File{}, err
	}
	p := filepath.Join(s.StepDir, name)
	if err := atomicfile.Write(p, b, 0o644); err != nil {
		return step.File{}, err
	}
	sum := sha256.Sum256(b)
	runDir := filepath.Dir(filepath.Dir(s.StepDir))
	rel, err := filepath.Rel(runDir, p)
	if err != nil {
		rel = p
	}
	return step.File{Path: filepath.ToSlash(rel), SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b)), Kind: kind}, nil
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
