package run_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/source"
)

// gitRepo commits the pipeline file body (and a source) in a new
// repository and returns the pipeline's path.
func gitRepo(t *testing.T, body string) string {
	t.Helper()
	testenv.RequireTool(t, "git")
	p := write(t, body)
	dir := filepath.Dir(p)
	if err := os.WriteFile(filepath.Join(dir, "k.cu"), []byte("// kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "c"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return p
}

// A run records the source commit in run.json; a release refuses a dirty
// tree before anything runs, naming the changed file.
func TestPipelineSource(t *testing.T) {
	t.Parallel()
	path := gitRepo(t, "release: true\nsteps:\n  - {id: a, run: echo hi}\n")
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(), run.WithGPUSource(noGPU(t)))
	if err != nil {
		t.Fatal(err)
	}
	src := res.Record.Source
	if src == nil || len(src.Commit) != 40 || src.Dirty {
		t.Fatalf("run.json source: %+v, want a clean tree's commit", src)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "k.cu"), []byte("// kernel!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "r2")
	_, err = run.Pipeline(t.Context(), p, run.WithOutDir(out), run.WithoutCache(), run.WithGPUSource(noGPU(t)))
	if !errors.Is(err, run.ErrInvalid) || !errors.Is(err, source.ErrDirty) || !strings.Contains(err.Error(), "k.cu") || !strings.Contains(err.Error(), "hint:") {
		t.Fatalf("release of a dirty tree: %v, want ErrInvalid and ErrDirty naming k.cu with a hint", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused release wrote a run directory")
	}
}

// An edit hidden from git status (skip-worktree, assume-unchanged) makes
// a run record a dirty tree, and a release refuse it.
func TestPipelineSourceHiddenEdit(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--skip-worktree", "--assume-unchanged"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			path := gitRepo(t, "steps:\n  - {id: a, run: echo hi}\n")
			dir := filepath.Dir(path)
			cmd := exec.Command("git", "update-index", flag, "k.cu")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git update-index: %v\n%s", err, out)
			}
			if err := os.WriteFile(filepath.Join(dir, "k.cu"), []byte("// hidden\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := pipeline.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(), run.WithGPUSource(noGPU(t)))
			if err != nil {
				t.Fatal(err)
			}
			if src := res.Record.Source; src == nil || !src.Dirty || !slices.Contains(src.DirtyFiles, "k.cu") {
				t.Fatalf("run.json source: %+v, want dirty with k.cu", src)
			}
			p.Release = true
			_, err = run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r2")), run.WithoutCache(), run.WithGPUSource(noGPU(t)))
			if !errors.Is(err, source.ErrDirty) || !strings.Contains(err.Error(), strings.TrimPrefix(flag, "--")) {
				t.Fatalf("release with a hidden edit: %v, want ErrDirty naming %s", err, flag)
			}
		})
	}
}
