package source_test

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/source"
)

// repo makes a git repository with one commit of files and returns its
// directory.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	testenv.RequireTool(t, "git")
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestDetectCleanAndDirty(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"kernels/a.cu": "__global__ void a() {}\n", "README": "r\n"})
	gitIn(t, dir, "remote", "add", "origin", "https://user:s3cret@example.com/org/kernels.git")
	head := gitIn(t, dir, "rev-parse", "HEAD")
	info, err := source.Detect(t.Context(), filepath.Join(dir, "kernels"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Commit != head || info.Dirty || info.URI != "git+https://example.com/org/kernels.git" {
		t.Fatalf("clean tree: got %+v, want commit %s, clean, URI without credentials", info, head)
	}
	if err := info.CheckClean("release"); err != nil {
		t.Fatalf("CheckClean of a clean tree: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels", "a.cu"), []byte("__global__ void a() {} \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// gpuattest's own run directories do not count.
	if err := os.MkdirAll(filepath.Join(dir, "kernels", ".gpuattest", "runs", "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels", ".gpuattest", "runs", "r1", "run.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err = source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Dirty || strings.Join(info.DirtyFiles, ",") != "kernels/a.cu,new.txt" {
		t.Fatalf("dirty tree: got dirty=%v files %q, want kernels/a.cu and new.txt", info.Dirty, info.DirtyFiles)
	}
	err = info.CheckClean("release")
	if !errors.Is(err, source.ErrDirty) || !strings.Contains(err.Error(), "kernels/a.cu") || !strings.Contains(err.Error(), "hint:") {
		t.Fatalf("CheckClean of a dirty tree: %v, want ErrDirty naming kernels/a.cu with a hint", err)
	}
}

func TestDetectNotRepository(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	dir := t.TempDir()
	if _, err := source.Detect(t.Context(), dir); !errors.Is(err, source.ErrNotRepository) {
		t.Fatalf("Detect outside a repository: %v, want ErrNotRepository", err)
	}
}

// A repository whose configuration names commands (fsmonitor, a filter
// driver, hooks) runs none of them when described.
func TestDetectHostileConfigRunsNothing(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"a.cu": "x\n", ".gitattributes": "* filter=evil\n"})
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := "touch " + marker
	gitIn(t, dir, "config", "core.fsmonitor", cmd)
	gitIn(t, dir, "config", "filter.evil.clean", cmd)
	gitIn(t, dir, "config", "filter.evil.process", cmd)
	gitIn(t, dir, "config", "filter.evil.required", "true")
	// A changed file makes status consult the filter.
	if err := os.WriteFile(filepath.Join(dir, "a.cu"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("Detect ran a command named by the repository's configuration")
	}
	if !info.Dirty {
		t.Fatalf("got %+v, want the changed a.cu seen as dirty", info)
	}
}

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://github.com/org/r.git", "git+https://github.com/org/r.git"},
		{"https://tok:x-oauth@github.com/org/r.git?x=1", "git+https://github.com/org/r.git"},
		{"git@github.com:org/r.git", "git+ssh://github.com/org/r.git"},
		{"ssh://git@host:2222/org/r", "git+ssh://host:2222/org/r"},
		{"/srv/git/r.git", "git+file:///srv/git/r.git"},
		{"../r", "git+file:///work/r"},
		{"file:///srv/r", "git+file:///srv/r"},
	} {
		if got := source.NormalizeURL(tc.in, "/work/here"); got != tc.want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCopyTracked(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"k/a.cu": "a\n", "b.txt": "b\n"})
	if err := os.WriteFile(filepath.Join(dir, "ignored-untracked"), []byte("u"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := source.CopyTracked(t.Context(), info, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "k", "a.cu"))
	if err != nil || string(got) != "a\n" {
		t.Fatalf("copied k/a.cu: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "ignored-untracked")); err == nil {
		t.Fatal("an untracked file was copied")
	}
	if _, err := os.Stat(filepath.Join(dst, ".git")); err == nil {
		t.Fatal(".git was copied")
	}
}

func TestRelativeRoot(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"k/a.cu": "a\n"})
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{{dir, ""}, {filepath.Join(dir, "k"), "k"}, {filepath.Join(link, "k"), "k"}} {
		if got, err := info.RelativeRoot(tc.dir); err != nil || got != tc.want {
			t.Errorf("RelativeRoot(%s) = %q, %v, want %q", tc.dir, got, err, tc.want)
		}
	}
	if _, err := info.RelativeRoot(t.TempDir()); err == nil {
		t.Error("RelativeRoot of a directory outside the tree: no error")
	}
}

// GIT_DIR and GIT_WORK_TREE in the environment (as inside a git hook) do
// not make Detect describe another repository.
func TestDetectIgnoresGitEnvironment(t *testing.T) {
	dir := repo(t, map[string]string{"a": "a\n"})
	other := repo(t, map[string]string{"b": "b\n"})
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_DIR", "")
	t.Setenv("GIT_WORK_TREE", "")
	os.Unsetenv("GIT_DIR")
	os.Unsetenv("GIT_WORK_TREE")
	if want := gitIn(t, dir, "rev-parse", "HEAD"); info.Commit != want {
		t.Fatalf("Detect with GIT_DIR set elsewhere: commit %s, want %s", info.Commit, want)
	}
}

// hide edits a committed file and hides the edit from git status with
// how (a git update-index flag); it returns the repository.
func hide(t *testing.T, how string) string {
	t.Helper()
	dir := repo(t, map[string]string{"k/a.cu": "__global__ void a() { x += 1; }\n", "b.txt": "b\n"})
	gitIn(t, dir, "update-index", how, "k/a.cu")
	if err := os.WriteFile(filepath.Join(dir, "k", "a.cu"), []byte("__global__ void a() { x -= 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := gitIn(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status after %s shows %q: the edit is not hidden", how, st)
	}
	return dir
}

// An edit hidden from git status with skip-worktree or assume-unchanged
// makes the tree dirty, and CheckClean names the flag with a hint.
func TestDetectHiddenEdits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ how, flag string }{{"--skip-worktree", "skip-worktree"}, {"--assume-unchanged", "assume-unchanged"}} {
		t.Run(tc.flag, func(t *testing.T) {
			t.Parallel()
			dir := hide(t, tc.how)
			info, err := source.Detect(t.Context(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if !info.Dirty || strings.Join(info.DirtyFiles, ",") != "k/a.cu" {
				t.Fatalf("got dirty=%v files %q, want k/a.cu dirty", info.Dirty, info.DirtyFiles)
			}
			err = info.CheckClean("release: true")
			if !errors.Is(err, source.ErrDirty) || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), "--no-"+tc.flag) {
				t.Fatalf("CheckClean: %v, want ErrDirty naming %s and how to clear it", err, tc.flag)
			}
		})
	}
}

// A flag on an unchanged file still refuses the tree: the index would
// hide a later edit.
func TestDetectFlagAlone(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"a.cu": "a\n"})
	gitIn(t, dir, "update-index", "--skip-worktree", "a.cu")
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Dirty || len(info.Hidden) != 1 || !strings.Contains(info.Hidden[0], "skip-worktree") {
		t.Fatalf("got %+v, want a.cu reported as skip-worktree", info)
	}
}

// An edit that keeps the file's size and modification time, in a
// repository configured to compare little stat data, is invisible to
// git status; Detect hashes the file and sees it.
func TestDetectEditWithOldStat(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q")
	p := filepath.Join(dir, "a.cu")
	old := time.Now().Add(-time.Hour)
	if err := os.WriteFile(p, []byte("aaaa\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "c")
	gitIn(t, dir, "config", "core.checkStat", "minimal")
	gitIn(t, dir, "config", "core.trustctime", "false")
	if err := os.WriteFile(p, []byte("bbbb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if st := gitIn(t, dir, "status", "--porcelain"); st != "" {
		t.Logf("git status sees the edit (%q); Detect must too", st)
	}
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Dirty || strings.Join(info.DirtyFiles, ",") != "a.cu" {
		t.Fatalf("got dirty=%v files %q, want a.cu dirty", info.Dirty, info.DirtyFiles)
	}
}

// git replace cannot make HEAD's commit id stand for another tree:
// Detect reads the commit itself.
func TestDetectIgnoresReplaceObjects(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"a.cu": "real\n"})
	head := gitIn(t, dir, "rev-parse", "HEAD")
	gitIn(t, dir, "checkout", "-q", "-b", "other")
	if err := os.WriteFile(filepath.Join(dir, "a.cu"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "commit", "-q", "-am", "edit")
	other := gitIn(t, dir, "rev-parse", "HEAD")
	gitIn(t, dir, "checkout", "-q", "--detach", head)
	// The work tree now holds "real"; make it "edited" and replace HEAD's
	// commit with the edited one, so git status sees a clean tree.
	if err := os.WriteFile(filepath.Join(dir, "a.cu"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "replace", head, other)
	gitIn(t, dir, "reset", "-q")
	if st := gitIn(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status with the replacement shows %q: the test's premise fails", st)
	}
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Commit != head || !info.Dirty {
		t.Fatalf("got commit %s dirty=%v, want %s dirty", info.Commit, info.Dirty, head)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := source.CopyTracked(t.Context(), info, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "a.cu")); string(got) != "real\n" {
		t.Fatalf("copied a.cu = %q, want the commit's \"real\\n\"", got)
	}
}

// CopyTracked copies the commit's files, not the work tree's: an edit
// hidden with skip-worktree does not reach the copy.
func TestCopyTrackedIgnoresHiddenEdit(t *testing.T) {
	t.Parallel()
	dir := hide(t, "--skip-worktree")
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := source.CopyTracked(t.Context(), info, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "k", "a.cu")); !strings.Contains(string(got), "x += 1") {
		t.Fatalf("copied k/a.cu = %q, want the commit's bytes", got)
	}
}

// A loose object rewritten with other content under the same id is
// refused, not copied.
func TestCopyTrackedRefusesAlteredObject(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"a.cu": "real\n"})
	oid := gitIn(t, dir, "rev-parse", "HEAD:a.cu")
	obj := filepath.Join(dir, ".git", "objects", oid[:2], oid[2:])
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	fmt.Fprintf(w, "blob 5\x00fake\n")
	w.Close()
	if err := os.Remove(obj); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(obj, z.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	info, err := source.Detect(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	err = source.CopyTracked(t.Context(), info, filepath.Join(t.TempDir(), "copy"))
	if err == nil || !strings.Contains(err.Error(), "altered") {
		t.Fatalf("CopyTracked with an altered object: %v, want it refused", err)
	}
}

// Without git on PATH, a directory under no .git is still no repository
// (a carried bundle on a machine without git), while one in a work tree
// needs git and says so.
func TestDetectWithoutGit(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GIT_DIR", "")
	dir := t.TempDir()
	if _, err := source.Detect(t.Context(), dir); !errors.Is(err, source.ErrNotRepository) {
		t.Fatalf("Detect outside a repository without git: %v, want ErrNotRepository", err)
	}
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := source.Detect(t.Context(), sub); err == nil || errors.Is(err, source.ErrNotRepository) || !strings.Contains(err.Error(), "hint: install git") {
		t.Fatalf("Detect in a work tree without git: %v, want the finding-git error with its hint", err)
	}
}
