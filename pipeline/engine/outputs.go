package engine

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/internal/digest"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// expandGlobs returns the files (slash paths relative to dir) matched by
// globs; "**" matches any number of directories, and a matched directory
// contributes every file below it. Each glob must match something.
func expandGlobs(dir string, globs []string, what string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(rel string) error {
		full := filepath.Join(dir, filepath.FromSlash(rel))
		st, err := os.Stat(full)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			if !seen[rel] {
				seen[rel] = true
				out = append(out, rel)
			}
			return nil
		}
		return filepath.WalkDir(full, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			r, _ := filepath.Rel(dir, p)
			r = filepath.ToSlash(r)
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
			return nil
		})
	}
	for i, g := range globs {
		matches, err := glob(dir, g)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %w", what, i, g, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("%s[%d] %q matched no files in %s", what, i, g, dir)
		}
		for _, m := range matches {
			if err := add(m); err != nil {
				return nil, fmt.Errorf("%s[%d] %q: %w", what, i, g, err)
			}
		}
	}
	sort.Strings(out)
	return out, nil
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
// executor reported (artifacts and results under the work dir).
func collectOutputs(wd string, globs []string, out *step.Outcome) ([]step.File, error) {
	paths, err := expandGlobs(wd, globs, "outputs")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
	}
	for _, f := range append(append([]step.File(nil), out.Artifacts...), out.Results...) {
		p := filepath.ToSlash(filepath.Clean(filepath.FromSlash(f.Path)))
		if strings.HasPrefix(p, "../") || filepath.IsAbs(f.Path) || seen[p] {
			continue
		}
		if _, err := os.Stat(filepath.Join(wd, filepath.FromSlash(p))); err != nil {
			continue
		}
		seen[p] = true
		paths = append(paths, p)
	}
	sort.Strings(paths)
	files := make([]step.File, 0, len(paths))
	for _, p := range paths {
		sum, size, err := digest.File(filepath.Join(wd, filepath.FromSlash(p)))
		if err != nil {
			return nil, fmt.Errorf("hashing output %s: %w", p, err)
		}
		files = append(files, step.File{Path: p, SHA256: sum, Size: size})
	}
	return files, nil
}

// copyOutputs copies outputs into the step's directory under outputs/.
func copyOutputs(wd, stepDir string, files []step.File) error {
	for _, f := range files {
		dst := filepath.Join(stepDir, "outputs", filepath.FromSlash(f.Path))
		if err := atomicfile.Copy(dst, filepath.Join(wd, filepath.FromSlash(f.Path))); err != nil {
			return fmt.Errorf("copying output %s into the run directory: %w", f.Path, err)
		}
	}
	return nil
}
