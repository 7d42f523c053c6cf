package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

// Info is what a run records about its source tree.
type Info struct {
	// URI is the repository: the fetch URL of remote origin (else of the
	// first remote), as git+https://, git+ssh:// or git+file:// without
	// any user name or password; empty when the repository has no remote.
	URI string `json:"uri,omitempty"`
	// Commit is the hex id of the checked-out commit (HEAD).
	Commit string `json:"commit"`
	// Dirty is true when a tracked file differs from the commit or an
	// untracked file that is not ignored exists.
	Dirty bool `json:"dirty"`
	// DirtyFiles are the first MaxDirtyFiles such files, slash paths
	// relative to the work tree's top.
	DirtyFiles []string `json:"dirty_files,omitempty"`
	// Hidden explains each difference that git status does not show: a
	// file the index marks skip-worktree or assume-unchanged, or whose
	// work-tree bytes are not the commit's though the index says they
	// are. Its paths are also in DirtyFiles.
	Hidden []string `json:"-"`
	// Root is the directory a pipeline ran from (its root), as a slash
	// path relative to the work tree's top; empty for the top itself.
	// Callers set it (see RelativeRoot).
	Root string `json:"root,omitempty"`
	// Top is the work tree's top directory on this machine; it is never
	// written into run records or attestations.
	Top string `json:"-"`
}

// MaxDirtyFiles caps the dirty files Info lists.
const MaxDirtyFiles = 20

// ErrNotRepository is returned by Detect for a directory in no git work
// tree.
var ErrNotRepository = errors.New("not in a git work tree")

// ErrDirty is wrapped by CheckClean's error.
var ErrDirty = errors.New("the source tree has uncommitted changes")

// Timeout bounds each git command Detect runs.
const Timeout = 30 * time.Second

// maxOutput bounds what Detect reads from one git command.
const maxOutput = 4 << 20

var commitRE = lazyregexp.New(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// Detect describes the git work tree that holds dir, with the git
// command line tool: HEAD's commit, the remote's URL and whether the tree
// is dirty. git runs with a bounded time and output, without the
// repository's hooks, fsmonitor or filter drivers (a hostile repository's
// configuration runs no command), and without taking locks. A directory in
// no work tree gives ErrNotRepository, also where git is not installed
// (a carried bundle on a GPU machine): only a directory under a .git
// needs git.
func Detect(ctx context.Context, dir string) (*Info, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("git"); err != nil {
		if !underGit(abs) {
			return nil, fmt.Errorf("%s: %w", dir, ErrNotRepository)
		}
		return nil, fmt.Errorf("finding git: %w\nhint: install git to record the source commit", err)
	}
	top, err := git(ctx, abs, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		if strings.Contains(err.Error(), "not a git repository") {
			return nil, fmt.Errorf("%s: %w", dir, ErrNotRepository)
		}
		return nil, err
	}
	info := &Info{Top: strings.TrimSpace(string(top))}
	// Filter drivers named in any config would run on status: blank them.
	drivers, _ := git(ctx, info.Top, nil, "config", "--name-only", "--get-regexp", `^filter\.`)
	var safe []string
	for _, name := range strings.Fields(string(drivers)) {
		if i := strings.LastIndexByte(name, '.'); i > 0 && strings.HasPrefix(name, "filter.") {
			safe = append(safe, "-c", name[:i]+".clean=", "-c", name[:i]+".smudge=", "-c", name[:i]+".process=", "-c", name[:i]+".required=false")
		}
	}
	head, err := git(ctx, info.Top, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return nil, fmt.Errorf("%s: finding the checked-out commit: %w\nhint: commit the tree first", dir, err)
	}
	info.Commit = strings.TrimSpace(string(head))
	if !commitRE.MatchString(info.Commit) {
		return nil, fmt.Errorf("%s: git rev-parse HEAD said %q: expected a hex commit id", dir, info.Commit)
	}
	if info.URI, err = remoteURI(ctx, info.Top); err != nil {
		return nil, err
	}
	status, err := git(ctx, info.Top, safe, "status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=normal", "--ignore-submodules=none")
	if err != nil {
		return nil, fmt.Errorf("%s: asking git for changes: %w", dir, err)
	}
	files, dirty := dirtyFiles(status)
	hidden, err := hiddenChanges(ctx, info.Top, info.Commit)
	if err != nil {
		return nil, fmt.Errorf("%s: comparing the work tree with commit %s: %w", dir, info.Commit, err)
	}
	shown := map[string]bool{}
	for _, f := range files {
		shown[f] = true
	}
	for _, h := range hidden {
		if shown[h.path] {
			continue
		}
		dirty = true
		files = append(files, h.path)
		if len(info.Hidden) < MaxDirtyFiles {
			info.Hidden = append(info.Hidden, h.path+": "+h.why)
		}
	}
	sort.Strings(files)
	info.Dirty, info.DirtyFiles = dirty, files[:min(len(files), MaxDirtyFiles)]
	return info, nil
}

// change is a path whose work-tree state differs from the commit, and why.
type change struct{ path, why string }

// hiddenChanges compares the work tree and the index at top with the tree
// of commit, read from the object store with every object's id checked,
// without trusting what the index says about the work tree: git status
// skips files marked skip-worktree or assume-unchanged and files whose
// stat data the index claims to know, and a crafted index can claim
// anything. Every tracked regular file and link is read and hashed.
func hiddenChanges(ctx context.Context, top, commit string) ([]change, error) {
	objs, err := openObjects(ctx, top, len(commit))
	if err != nil {
		return nil, err
	}
	entries, err := objs.tree(commit)
	objs.close()
	if err != nil {
		return nil, err
	}
	index, err := git(ctx, top, nil, "ls-files", "-z", "-v", "-s")
	if err != nil {
		return nil, fmt.Errorf("listing the index: %w", err)
	}
	inCommit := make(map[string]bool, len(entries))
	for _, e := range entries {
		inCommit[e.path] = true
	}
	var changes []change
	inIndex := map[string]bool{}
	for _, rec := range bytes.Split(index, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, name, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 || len(f[0]) != 1 {
			return nil, fmt.Errorf("git ls-files -v -s: unexpected record %q", rec)
		}
		inIndex[name] = true
		switch tag := f[0][0]; {
		case tag == 'S' || tag == 's':
			changes = append(changes, change{name, "marked skip-worktree in the index (git ls-files -v shows " + f[0] + "), so git status does not look at it (clear it: git update-index --no-skip-worktree -- " + name + "; a sparse checkout: git sparse-checkout disable)"})
		case tag >= 'a' && tag <= 'z':
			changes = append(changes, change{name, "marked assume-unchanged in the index (git ls-files -v shows " + f[0] + "), so git status does not look at it (clear it: git update-index --no-assume-unchanged -- " + name + ")"})
		case !inCommit[name]:
			changes = append(changes, change{name, "in the index but not in the commit"})
		}
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if e.mode == "160000" {
			continue // git status --ignore-submodules=none compares submodules
		}
		if !inIndex[e.path] {
			changes = append(changes, change{e.path, "in the commit but not in the index"})
			continue
		}
		if why := compareFile(root, e, len(commit)); why != "" {
			changes = append(changes, change{e.path, why})
		}
	}
	// A path flagged above and also differing is reported once, by flag.
	seen := map[string]bool{}
	out := changes[:0]
	for _, c := range changes {
		if !seen[c.path] {
			seen[c.path] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// compareFile says how the work-tree file of e differs from the commit's
// (its bytes, its type or its executable bit), or "" when it does not.
func compareFile(root *os.Root, e entry, hexLen int) string {
	name := filepath.FromSlash(e.path)
	fi, err := root.Lstat(name)
	if err != nil {
		return "missing from the work tree"
	}
	var id string
	switch {
	case e.mode == "120000":
		if fi.Mode()&os.ModeSymlink == 0 {
			return "a symbolic link in the commit, not in the work tree"
		}
		target, err := root.Readlink(name)
		if err != nil {
			return "reading the link: " + err.Error()
		}
		id, err = blobID(hexLen, int64(len(target)), strings.NewReader(target))
		if err != nil {
			return err.Error()
		}
	case !fi.Mode().IsRegular():
		return "a regular file in the commit, not in the work tree"
	case (fi.Mode()&0o100 != 0) != (e.mode == "100755"):
		return "its executable bit differs from the commit's (git mode " + e.mode + ")"
	default:
		f, err := root.Open(name)
		if err != nil {
			return "reading it: " + err.Error()
		}
		id, err = blobID(hexLen, fi.Size(), f)
		f.Close()
		if err != nil {
			return "reading it: " + err.Error()
		}
	}
	if id != e.oid {
		return "its bytes differ from the commit's (blob " + id + " in the work tree, " + e.oid + " in the commit), though git status does not show it"
	}
	return ""
}

// dirtyFiles parses git status --porcelain=v1 -z into every path it
// names (status's output is bounded). Untracked files under
// a .gpuattest directory (gpuattest's own run directories and cache) do
// not make the tree dirty.
func dirtyFiles(status []byte) ([]string, bool) {
	var files []string
	dirty := false
	for _, rec := range bytes.Split(status, []byte{0}) {
		if len(rec) < 4 {
			continue
		}
		if bytes.HasPrefix(rec, []byte("?? ")) && slices.Contains(strings.Split(string(rec[3:]), "/"), ".gpuattest") {
			continue
		}
		dirty = true
		files = append(files, string(rec[3:]))
	}
	return files, dirty
}

// remoteURI is the URI of remote origin, else of the first remote, else "".
func remoteURI(ctx context.Context, top string) (string, error) {
	out, err := git(ctx, top, nil, "remote")
	if err != nil {
		return "", fmt.Errorf("listing remotes: %w", err)
	}
	remotes := strings.Fields(string(out))
	if len(remotes) == 0 {
		return "", nil
	}
	name := remotes[0]
	for _, r := range remotes {
		if r == "origin" {
			name = r
		}
	}
	u, err := git(ctx, top, nil, "config", "--get", "remote."+name+".url")
	if err != nil {
		return "", nil
	}
	return NormalizeURL(strings.TrimSpace(string(u)), top), nil
}

var scpLike = lazyregexp.New(`^(?:[^@/]+@)?([^:/]+):(.+)$`)

// NormalizeURL turns a git remote URL into a URI for attestations:
// https://u:p@host/r.git becomes git+https://host/r.git (no credentials),
// git@host:org/r.git becomes git+ssh://host/org/r.git, and a local path
// (relative paths resolved against dir) becomes git+file:///abs/path.
func NormalizeURL(raw, dir string) string {
	if raw == "" {
		return ""
	}
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" || err == nil && u.Scheme == "file" {
		u.User = nil
		u.RawQuery, u.Fragment = "", ""
		scheme := strings.TrimPrefix(u.Scheme, "git+")
		u.Scheme = "git+" + scheme
		if scheme == "git" {
			u.Scheme = "git"
		}
		return u.String()
	}
	if m := scpLike.FindStringSubmatch(raw); m != nil && !strings.HasPrefix(raw, "/") && !strings.HasPrefix(raw, ".") {
		return "git+ssh://" + m[1] + "/" + strings.TrimPrefix(m[2], "/")
	}
	p := raw
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return (&url.URL{Scheme: "git+file", Path: filepath.ToSlash(filepath.Clean(p))}).String()
}

// RelativeRoot returns dir (a directory inside info's work tree) as a
// slash path relative to the work tree's top, "" for the top itself,
// symbolic links resolved on both sides.
func (info *Info) RelativeRoot(dir string) (string, error) {
	top, err := filepath.EvalSymlinks(info.Top)
	if err != nil {
		return "", err
	}
	d, err := filepath.Abs(dir)
	if err == nil {
		d, err = filepath.EvalSymlinks(d)
	}
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(top, d)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", fmt.Errorf("%s is not inside the work tree %s", dir, info.Top)
	}
	if rel == "." {
		return "", nil
	}
	return filepath.ToSlash(rel), nil
}

// CheckClean returns an error wrapping ErrDirty, naming the dirty files
// with a hint, when info's tree is dirty.
func (info *Info) CheckClean(what string) error {
	if !info.Dirty {
		return nil
	}
	more := ""
	if len(info.DirtyFiles) == MaxDirtyFiles {
		more = "\n  ... (more)"
	}
	hidden := ""
	if len(info.Hidden) > 0 {
		hidden = "\nnot shown by git status:\n  " + strings.Join(info.Hidden, "\n  ")
	}
	return fmt.Errorf("%s: %w:\n  %s%s%s\nhint: commit or stash them (git status), or list build outputs in .gitignore, so that the commit recorded is what was built", what, ErrDirty, strings.Join(info.DirtyFiles, "\n  "), more, hidden)
}

// git runs git with args in dir, bounded in time and output, with the
// repository's hooks, fsmonitor and pager off and no lock taken.
func git(ctx context.Context, dir string, extra []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := gitCommand(ctx, dir, extra, args...)
	var stdout, stderr limited
	stdout.max, stderr.max = maxOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stdout.over {
		return nil, fmt.Errorf("git %s: more than %d bytes of output", strings.Join(args, " "), maxOutput)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// gitCommand is the git command every call runs: the repository's hooks,
// fsmonitor, untracked cache and pager off; the system configuration,
// replace objects (git replace, which would make a commit id stand for
// another tree) and any GIT_* variable of this process ignored; no lock
// taken and no prompt.
func gitCommand(ctx context.Context, dir string, extra []string, args ...string) *exec.Cmd {
	base := []string{"-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false", "-c", "core.checkStat=default", "-c", "core.trustctime=true", "-c", "core.ignoreStat=false", "--no-pager"}
	full := append(append(base, extra...), args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = dir
	cmd.Env = append(gitFreeEnv(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_PAGER=cat",
		"GIT_NO_REPLACE_OBJECTS=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_ATTR_NOSYSTEM=1", "GIT_NO_LAZY_FETCH=1")
	cmd.WaitDelay = time.Second
	return cmd
}

// gitFreeEnv is this process's environment without any GIT_* variable:
// GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE (set inside git hooks) or
// GIT_CONFIG_PARAMETERS would make git describe another tree or run
// configured commands.
func gitFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// limited is a buffer that keeps at most max bytes and notes more.
type limited struct {
	bytes.Buffer
	max  int
	over bool
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); len(p) > room {
		l.over = true
		if room > 0 {
			l.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return l.Buffer.Write(p)
}

var _ io.Writer = (*limited)(nil)

// underGit reports whether dir or a parent holds a .git entry, or GIT_DIR
// is set: whether git could find a work tree there.
func underGit(dir string) bool {
	if os.Getenv("GIT_DIR") != "" {
		return true
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return true
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}
