package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// within reports whether p is dir or below it, by their names alone
// (both clean and absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// workTree is a step's work dir, opened as an os.Root: every file the
// engine reads, writes or removes in it goes through the root, so no
// symlink in the tree can take it outside.
type workTree struct {
	dir  string // absolute, symlinks resolved
	root *os.Root
}

func openWorkTree(dir string) (*workTree, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &workTree{dir: dir, root: r}, nil
}

func (w *workTree) Close() error { return w.root.Close() }

// entry is a file a glob found: a regular file, or a symlink recorded as
// a link.
type entry struct {
	rel  string // slash path relative to the work dir
	link string // the link's target as written, for a symlink
}

// inspect looks at rel without following it out of the work dir: its
// directory must resolve inside the work dir, and a symlink must point
// inside it (it is then a link entry, never followed). It reports
// whether rel is a directory.
func (w *workTree) inspect(rel string) (entry, bool, error) {
	if rel == "." {
		return entry{rel: rel}, true, nil
	}
	full := filepath.Join(w.dir, filepath.FromSlash(rel))
	parent, err := filepath.EvalSymlinks(filepath.Dir(full))
	if err != nil {
		return entry{}, false, err
	}
	if !within(w.dir, parent) {
		return entry{}, false, fmt.Errorf("%s is outside the step's workdir: %s resolves to %s", rel, path.Dir(rel), parent)
	}
	fi, err := os.Lstat(filepath.Join(parent, filepath.Base(full)))
	if err != nil {
		return entry{}, false, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(filepath.Join(parent, filepath.Base(full)))
		if err != nil {
			return entry{}, false, err
		}
		dest := target
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(parent, dest)
		}
		if r, err := filepath.EvalSymlinks(dest); err == nil {
			dest = r
		}
		if !within(w.dir, dest) {
			return entry{}, false, fmt.Errorf("%s is a symlink to %s, outside the step's workdir\nhint: gpuattest records links inside the workdir as links and never follows one out", rel, target)
		}
		return entry{rel: rel, link: target}, false, nil
	case fi.IsDir():
		return entry{rel: rel}, true, nil
	case fi.Mode().IsRegular():
		return entry{rel: rel}, false, nil
	}
	return entry{}, false, fmt.Errorf("%s is a %s, not a file, a directory or a symlink", rel, fi.Mode().Type())
}

// expandGlobs returns the entries matched by globs (slash patterns
// relative to the work dir); "**" matches any number of directories, and
// a matched directory contributes every entry below it. Each glob must
// match something; a match that leaves the work dir is an error naming it.
func (w *workTree) expandGlobs(globs []string, what string) ([]entry, error) {
	seen := map[string]bool{}
	var out []entry
	keep := func(e entry) {
		if !seen[e.rel] {
			seen[e.rel] = true
			out = append(out, e)
		}
	}
	add := func(rel string) error {
		e, isDir, err := w.inspect(rel)
		if err != nil {
			return err
		}
		if !isDir {
			keep(e)
			return nil
		}
		// The walk goes through the root and never follows a symlink.
		return fs.WalkDir(w.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			r := filepath.ToSlash(p)
			if d.Type().IsRegular() {
				keep(entry{rel: r})
				return nil
			}
			e, _, err := w.inspect(r)
			if err != nil {
				return err
			}
			keep(e)
			return nil
		})
	}
	for i, g := range globs {
		if c := path.Clean(g); path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
			return nil, fmt.Errorf("%s[%d] %q leaves the step's workdir", what, i, g)
		}
		matches, err := glob(w.dir, g)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %w", what, i, g, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("%s[%d] %q matched no files in %s", what, i, g, w.dir)
		}
		for _, m := range matches {
			if err := add(m); err != nil {
				return nil, fmt.Errorf("%s[%d] %q: %w", what, i, g, err)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
}

// file hashes an entry: a regular file read through the root, or a
// link's target text.
func (w *workTree) file(e entry) (step.File, error) {
	if e.link != "" {
		sum := sha256.Sum256([]byte(e.link))
		return step.File{Path: e.rel, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(e.link)), Link: e.link}, nil
	}
	f, err := w.root.Open(filepath.FromSlash(e.rel))
	if err != nil {
		return step.File{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return step.File{}, err
	}
	sum, size, err := digest.Reader(f)
	if err != nil {
		return step.File{}, err
	}
	return step.File{Path: e.rel, SHA256: sum, Size: size, Mode: uint32(st.Mode().Perm())}, nil
}

// current re-reads a recorded file: what it is now, for resume.
func (w *workTree) current(f step.File) (step.File, error) {
	e, isDir, err := w.inspect(f.Path)
	if err != nil {
		return step.File{}, err
	}
	if isDir {
		return step.File{}, fmt.Errorf("%s is a directory", f.Path)
	}
	return w.file(e)
}

// glob matches a slash pattern under dir, with ** for any depth.
func glob(dir, pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	if !strings.Contains(pattern, "**") {
		ms, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(pattern)))
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(ms))
		for _, m := range ms {
			r, _ := filepath.Rel(dir, m)
			out = append(out, filepath.ToSlash(r))
		}
		return out, nil
	}
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		r = filepath.ToSlash(r)
		if r == "." {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".gpuattest") {
			return filepath.SkipDir
		}
		if !d.IsDir() && matchDoubleStar(pattern, r) {
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// matchDoubleStar matches slash path name against pattern segment by
// segment; a "**" segment matches zero or more segments.
func matchDoubleStar(pattern, name string) bool {
	ps, ns := strings.Split(pattern, "/"), strings.Split(name, "/")
	var match func(pi, ni int) bool
	match = func(pi, ni int) bool {
		for pi < len(ps) {
			if ps[pi] == "**" {
				for k := ni; k <= len(ns); k++ {
					if match(pi+1, k) {
						return true
					}
				}
				return false
			}
			if ni >= len(ns) {
				return false
			}
			if ok, _ := path.Match(ps[pi], ns[ni]); !ok {
				return false
			}
			pi++
			ni++
		}
		return ni == len(ns)
	}
	return match(0, 0)
}

// collectOutputs hashes the step's declared outputs plus the files its
// executor reported (artifacts and results under the work dir), under the
// same rule: nothing outside the work dir, links recorded as links.
func collectOutputs(w *workTree, globs []string, out *step.Outcome) ([]step.File, error) {
	entries, err := w.expandGlobs(globs, runlayout.OutputsDir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.rel] = true
	}
	for _, f := range append(append([]step.File(nil), out.Artifacts...), out.Results...) {
		p := path.Clean(filepath.ToSlash(f.Path))
		if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") || seen[p] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(w.dir, filepath.FromSlash(p))); err != nil {
			continue
		}
		e, isDir, err := w.inspect(p)
		if err != nil {
			return nil, fmt.Errorf("%s %w", f.Kind, err)
		}
		if isDir {
			continue
		}
		seen[p] = true
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].rel < entries[j].rel })
	files := make([]step.File, 0, len(entries))
	for _, e := range entries {
		f, err := w.file(e)
		if err != nil {
			return nil, fmt.Errorf("hashing output %s: %w", e.rel, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// copyOutputs copies outputs into the step's directory under outputs/,
// reading them through the work dir's root; links are recreated as links.
func copyOutputs(w *workTree, stepDir string, files []step.File) error {
	for _, f := range files {
		dst := runlayout.Output(stepDir, f.Path)
		if err := copyOutput(w, dst, f); err != nil {
			return fmt.Errorf("copying output %s into the run directory: %w", f.Path, err)
		}
	}
	return nil
}

// copyOutput copies output f from the work dir to dst, read-only with
// f's own permission bits otherwise (step.File.ReadOnly): a 0600 key stays
// readable by its owner only.
func copyOutput(w *workTree, dst string, f step.File) error {
	if f.Link != "" {
		return replaceWithLink(dst, f.Link)
	}
	in, err := w.root.Open(filepath.FromSlash(f.Path))
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFrom(dst, f.ReadOnly(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// replaceWithLink makes dst a symlink to target, replacing what is there.
func replaceWithLink(dst, target string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Symlink(target, dst)
}

// write writes what r holds to name (a slash path) atomically, through
// the root.
func (w *workTree) write(name string, perm os.FileMode, r io.Reader) error {
	return atomicfile.WriteInRoot(w.root, filepath.FromSlash(name), perm, func(dst io.Writer) error {
		_, err := io.Copy(dst, r)
		return err
	})
}
