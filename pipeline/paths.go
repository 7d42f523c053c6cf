package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The sandbox rule: every path a step names stays inside the pipeline's
// root (its workdir), and a path relative to the step's workdir stays
// inside that workdir (the only directory container runners bind). Load
// checks it lexically, with positions; the engine and the executors
// enforce it again on resolved paths when the step runs.

// pathBase is what a step path is relative to.
type pathBase int

const (
	// fromRoot: the pipeline's root; the path stays inside it.
	fromRoot pathBase = iota
	// fromWorkdir: the step's workdir; the path stays inside it.
	fromWorkdir
	// fromFile: the pipeline file's directory; the path stays inside
	// the pipeline's root.
	fromFile
)

// stepPath is a step field that names a file, a directory or globs.
type stepPath struct {
	// field is the field's path under steps[i] (e.g. "results", or
	// "reference.results" for a nested one).
	field string
	base  pathBase
	// glob: the values are globs (lists are indexed: inputs[1]).
	glob bool
	// values returns the field's values; list fields are reported as
	// field[j].
	values func(s *Step) []string
	list   bool
}

func one(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// stepPaths is every step field that names a path. Adding a path field to
// Step is one line here; Load and the engine's checks pick it up.
var stepPaths = []stepPath{
	{field: "workdir", base: fromRoot, values: func(s *Step) []string { return one(s.Workdir) }},
	{field: "inputs", base: fromWorkdir, glob: true, list: true, values: func(s *Step) []string { return s.Inputs }},
	{field: "outputs", base: fromWorkdir, glob: true, list: true, values: func(s *Step) []string { return s.Outputs }},
	{field: "sources", base: fromWorkdir, list: true, values: func(s *Step) []string { return s.Sources }},
	{field: "outDir", base: fromWorkdir, values: func(s *Step) []string { return one(s.OutDir) }},
	{field: "results", base: fromWorkdir, values: func(s *Step) []string { return one(s.Results) }},
	{field: "reference.results", base: fromWorkdir, values: func(s *Step) []string {
		if s.Reference == nil {
			return nil
		}
		return one(s.Reference.Results)
	}},
	{field: "baseline", base: fromFile, values: func(s *Step) []string { return one(s.Baseline) }},
	{field: "reference.release", base: fromFile, values: func(s *Step) []string {
		if s.Reference == nil {
			return nil
		}
		dir, _ := LayoutDir(s.Reference.Release)
		return one(dir)
	}},
	{field: "reference.key", base: fromFile, values: func(s *Step) []string {
		if s.Reference == nil {
			return nil
		}
		return one(s.Reference.Key)
	}},
	{field: "reference.policy", base: fromFile, values: func(s *Step) []string {
		if s.Reference == nil {
			return nil
		}
		if _, ok := s.Reference.BuiltinPolicy(); ok {
			return nil // a built-in policy, not a file
		}
		return one(s.Reference.Policy)
	}},
}

// within reports whether path p is dir or below it, by their names
// alone (both absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// layout is where a pipeline file sits: what its relative paths mean.
type layout struct {
	dir     string // absolute directory of the file
	root    string // dir joined with the pipeline's workdir
	ceiling string // the directory root must stay inside
	why     string // what ceiling is, for messages
	given   bool   // ceiling came from WithRoot
}

// newLayout finds the ceiling of a pipeline file in dir: the root given
// with WithRoot, else the enclosing git work tree, else dir itself.
func newLayout(dir, workdir, root string) (*layout, error) {
	l := &layout{dir: dir, root: filepath.Join(dir, filepath.FromSlash(workdir))}
	switch {
	case root != "":
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, fmt.Errorf("resolving root %s: %w", root, err)
		}
		l.ceiling, l.why, l.given = abs, "the root given ("+abs+")", true
	default:
		if top := gitTop(dir); top != "" {
			l.ceiling, l.why = top, "the enclosing git work tree ("+top+")"
		} else {
			l.ceiling, l.why = dir, "the pipeline file's directory ("+dir+"; it is in no git work tree)"
		}
	}
	return l, nil
}

// gitTop returns the nearest directory at or above dir holding a .git
// entry (a directory, or the file of a linked worktree), or "".
func gitTop(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// workdir checks the pipeline-level workdir: relative, and its root
// inside the ceiling.
func (v *validator) workdir() {
	p := v.p
	if strings.HasPrefix(p.Workdir, "/") {
		v.add("workdir", false, "give a directory relative to the pipeline file, e.g. .. for the repository root", "workdir %q must be relative", p.Workdir)
		return
	}
	l := v.layout
	if l == nil {
		return
	}
	hint := "a pipeline's workdir may reach up to the repository root, not above it; to use a wider root on purpose, name it explicitly (gpuattest --root DIR)"
	if l.given {
		hint = "give a wider root, or a workdir inside the one given"
	}
	if !within(l.ceiling, l.root) {
		v.add("workdir", false, hint, "workdir %q climbs above %s", p.Workdir, l.why)
		return
	}
	// The same on disk: a symlink on the way must not lead above it.
	root, err1 := filepath.EvalSymlinks(l.root)
	ceiling, err2 := filepath.EvalSymlinks(l.ceiling)
	if err1 == nil && err2 == nil && !within(ceiling, root) {
		v.add("workdir", false, hint, "workdir %q resolves to %s (through a symlink), above %s", p.Workdir, root, l.why)
	}
}

// stepPaths checks step i's path fields against the sandbox rule.
func (v *validator) stepPaths(i int, s *Step) {
	wdOK := true
	for _, sp := range stepPaths {
		for j, val := range sp.values(s) {
			path := fmt.Sprintf("steps[%d].%s", i, sp.field)
			name := sp.field
			if sp.list {
				path = fmt.Sprintf("%s[%d]", path, j)
				name = fmt.Sprintf("%s[%d]", sp.field, j)
			}
			if strings.TrimSpace(val) == "" {
				continue // reported as empty by the field's own check
			}
			if sp.base == fromWorkdir && !wdOK {
				continue // the workdir is already wrong
			}
			ok := v.stepPath(path, name, sp, val)
			if sp.field == "workdir" && !ok {
				wdOK = false
			}
		}
	}
}

// stepPath checks one value; it reports false when it added a problem.
func (v *validator) stepPath(path, name string, sp stepPath, val string) bool {
	rel := filepath.FromSlash(val)
	if sp.glob {
		if filepath.IsAbs(rel) || !lexicallyInside(rel) {
			v.add(path, false, "globs are relative to the step's workdir", "glob %q must stay inside the work directory", val)
			return false
		}
		return true
	}
	var hint string
	switch sp.base {
	case fromRoot:
		hint = "give a directory relative to the pipeline's workdir (its root); steps see nothing outside the root"
	case fromWorkdir:
		hint = "give a path relative to the step's workdir, inside it; steps see nothing outside their workdir"
	case fromFile:
		hint = "give a path relative to the pipeline file, inside the pipeline's root (its workdir); gpuattest reads nothing above the root for a step"
	}
	if filepath.IsAbs(rel) {
		v.add(path, false, hint, "%s %q must be relative", name, val)
		return false
	}
	switch sp.base {
	case fromRoot:
		if !lexicallyInside(rel) {
			v.add(path, false, hint, "%s %q leaves the pipeline's root", name, val)
			return false
		}
	case fromWorkdir:
		if !lexicallyInside(rel) {
			v.add(path, false, hint, "%s %q leaves the step's workdir", name, val)
			return false
		}
	case fromFile:
		if v.layout != nil && !within(v.layout.root, filepath.Join(v.layout.dir, rel)) {
			v.add(path, false, hint, "%s %q leaves the pipeline's root %s", name, val, v.layout.root)
			return false
		}
	}
	return true
}

// insideWorkdir reports whether a step path (slash-separated, relative to
// the step's workdir) stays inside that workdir, by its names alone.
func insideWorkdir(p string) bool {
	rel := filepath.FromSlash(p)
	return !filepath.IsAbs(rel) && lexicallyInside(rel)
}

// lexicallyInside reports whether the relative path rel stays at or below
// the directory it is relative to, by its names alone.
func lexicallyInside(rel string) bool {
	c := filepath.Clean(rel)
	return c == "." || filepath.IsLocal(c)
}
