package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"io"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// cache is the build cache: a content-addressed store of output files
// (objects/<sha256>) and one manifest per key (keys/<key>.json).
type cache struct{ dir string }

// manifest is what a cache key restores.
type manifest struct {
	Key       string          `json:"key"`
	Outputs   []step.File     `json:"outputs"`
	Artifacts []step.File     `json:"artifacts,omitempty"`
	Results   []step.File     `json:"results,omitempty"`
	ExitCode  *int            `json:"exit_code,omitempty"`
	Details   json.RawMessage `json:"details,omitempty"`
	// Reads are the files the cached run's tools read, with their
	// digests: the entry restores only while each is unchanged.
	Reads []step.Read `json:"reads,omitempty"`
}

// keyInput is everything that determines a build step's outputs.
type keyInput struct {
	Version string            `json:"gpuattest_version"`
	Step    pipeline.Step     `json:"step"`
	Targets []string          `json:"targets"`
	Release bool              `json:"release"`
	Env     map[string]string `json:"env"`
	Workdir string            `json:"workdir"`
	Runner  string            `json:"runner"`
	Image   string            `json:"image"`
	Inputs  []step.File       `json:"inputs"`
	// Facts are what the executor adds to the key (step.KeyFacter): for
	// cuda-build, the toolchain's and the host compiler's digests.
	Facts json.RawMessage `json:"facts,omitempty"`
}

// maxReads caps the files a cache entry's reads may list, and so the
// files a lookup hashes.
const maxReads = 20000

// checkReads reports the first of m's reads whose file is not as the
// cached run read it (gone, or another digest), as a note; "" when all
// are. Relative paths are read through the work tree (never outside
// it); absolute ones on this machine, unless they lie in the step's
// image, which the key's image digest pins.
func checkReads(m *manifest, w *workTree) string {
	if len(m.Reads) > maxReads {
		return fmt.Sprintf("the entry lists %d files read, over %d", len(m.Reads), maxReads)
	}
	for _, r := range m.Reads {
		if r.InImage {
			continue
		}
		var sum string
		var err error
		if filepath.IsAbs(filepath.FromSlash(r.Path)) {
			sum, _, err = digest.File(filepath.FromSlash(r.Path))
		} else {
			var f step.File
			if f, err = w.current(step.File{Path: r.Path}); err == nil {
				sum = f.SHA256
			}
		}
		switch {
		case err != nil:
			return fmt.Sprintf("%s, read by the cached build, is gone: %v", r.Path, err)
		case sum != r.SHA256:
			return fmt.Sprintf("%s, read by the cached build, changed since", r.Path)
		}
	}
	return ""
}

// cacheKey is sha256 of the normalized step spec, the digests of its
// inputs (declared inputs, and sources for cuda-build), its image digest,
// the executor's facts (the toolchain, for cuda-build) and the gpuattest
// version. The files a build read beyond its declared inputs (headers)
// are not in the key: the entry lists them (manifest.Reads) and a lookup
// checks each.
func (e *run) cacheKey(s *pipeline.Step, sc *step.Context, inputs []step.File, facts any) (string, []string, error) {
	norm := *s
	norm.ID, norm.Description, norm.Needs = "", "", nil
	in := keyInput{
		Version: e.o.version, Step: norm, Targets: e.p.Targets, Release: e.p.Release,
		Env: e.p.Env, Workdir: s.Workdir, Runner: s.Runner, Image: sc.Image.String(), Inputs: inputs,
	}
	if facts != nil {
		b, err := json.Marshal(facts)
		if err != nil {
			return "", nil, fmt.Errorf("encoding the cache key's facts: %w", err)
		}
		in.Facts = b
	}
	var notes []string
	if len(s.Inputs)+len(s.Sources) == 0 {
		notes = append(notes, "no inputs declared: the cache key covers only the step's spec")
	}
	b, err := json.Marshal(in)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), notes, nil
}

// hashInputs digests a step's declared inputs and, for cuda-build, its
// sources (paths relative to the step's work dir, which they stay in; a
// symlink is recorded as a link).
func hashInputs(s *pipeline.Step, w *workTree) ([]step.File, error) {
	globs := append(append([]string(nil), s.Inputs...), s.Sources...)
	if len(globs) == 0 {
		return nil, nil
	}
	entries, err := w.expandGlobs(globs, "inputs")
	if err != nil {
		return nil, err
	}
	files := make([]step.File, 0, len(entries))
	for _, e := range entries {
		f, err := w.file(e)
		if err != nil {
			return nil, fmt.Errorf("hashing input %s: %w", e.rel, err)
		}
		files = append(files, f)
	}
	return files, nil
}

func (c *cache) manifestPath(key string) string {
	return filepath.Join(c.dir, "keys", key[:2], key+".json")
}

func (c *cache) objectPath(sum string) string {
	return filepath.Join(c.dir, "objects", sum[:2], sum)
}

func (c *cache) lookup(key string) (*manifest, bool) {
	data, err := os.ReadFile(c.manifestPath(key))
	if err != nil {
		return nil, false
	}
	var m manifest
	if json.Unmarshal(data, &m) != nil || m.Key != key {
		return nil, false
	}
	return &m, true
}

// restore writes a manifest's outputs into the work dir through its
// root, checking every digest; links are recreated as links.
func (c *cache) restore(m *manifest, w *workTree) ([]step.File, error) {
	for _, f := range m.Outputs {
		if f.Link != "" {
			if err := restoreLink(w, f); err != nil {
				return nil, fmt.Errorf("restoring %s: %w", f.Path, err)
			}
			continue
		}
		obj := c.objectPath(f.SHA256)
		sum, _, err := digest.File(obj)
		if err != nil {
			return nil, fmt.Errorf("object for %s: %w", f.Path, err)
		}
		if sum != f.SHA256 {
			return nil, fmt.Errorf("object for %s is corrupt (sha256 %s, want %s)", f.Path, sum[:12], f.SHA256[:12])
		}
		if cur, err := w.current(f); err == nil && cur.Link == "" && cur.SHA256 == f.SHA256 {
			continue
		}
		if err := c.restoreFile(w, f, obj); err != nil {
			return nil, fmt.Errorf("restoring %s: %w", f.Path, err)
		}
	}
	return m.Outputs, nil
}

// restoreFile copies a cache object into the work dir; the copy is the
// user's again: writable.
func (c *cache) restoreFile(w *workTree, f step.File, obj string) error {
	in, err := os.Open(obj)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	perm := st.Mode().Perm() | 0o200
	if f.Mode != 0 {
		perm = os.FileMode(f.Mode).Perm()
	}
	return w.write(f.Path, perm, in)
}

// copyObject copies a cache object to dst with perm.
func copyObject(dst, obj string, perm os.FileMode) error {
	in, err := os.Open(obj)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.WriteFrom(dst, perm, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// restoreLink makes f.Path in the work dir the link f records.
func restoreLink(w *workTree, f step.File) error {
	name := filepath.FromSlash(f.Path)
	if l, err := w.root.Readlink(name); err == nil && l == f.Link {
		return nil
	}
	if err := w.root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := w.root.RemoveAll(name); err != nil {
		return err
	}
	return w.root.Symlink(f.Link, name)
}

// linkOutputs puts the outputs into the step's outputs/ directory as hard
// links to the cache's read-only objects (already synced when stored),
// copying where a link is not possible; recorded links become links.
func (c *cache) linkOutputs(stepDir string, files []step.File) error {
	for _, f := range files {
		dst := runlayout.Output(stepDir, f.Path)
		if f.Link != "" {
			if err := replaceWithLink(dst, f.Link); err != nil {
				return fmt.Errorf("copying output %s into the run directory: %w", f.Path, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		obj := c.objectPath(f.SHA256)
		// A shared object made from a file with wider permissions is not
		// linked: the copy gets f's own.
		if st, err := os.Stat(obj); err == nil && st.Mode().Perm()&^f.ReadOnly() == 0 {
			if err := os.Link(obj, dst); err == nil {
				continue
			}
		}
		if err := copyObject(dst, obj, f.ReadOnly()); err != nil {
			return fmt.Errorf("copying output %s into the run directory: %w", f.Path, err)
		}
	}
	return nil
}

// store saves outputs and the manifest. The manifest is written last, so a
// crash leaves at worst unreferenced objects.
func (c *cache) store(key string, w *workTree, files []step.File, sr *StepRecord) error {
	if len(files) == 0 {
		return errors.New("no outputs to cache")
	}
	for _, f := range files {
		if f.Link != "" {
			continue // the manifest holds the link
		}
		obj := c.objectPath(f.SHA256)
		if _, err := os.Stat(obj); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(obj), 0o755); err != nil {
			return err
		}
		if err := copyOutput(w, obj, f); err != nil {
			return err
		}
		if sum, _, err := digest.File(obj); err != nil || sum != f.SHA256 {
			os.Remove(obj)
			return fmt.Errorf("output %s changed after it was hashed", f.Path)
		}
		// Objects are shared by hard links into run directories: read-only,
		// with the output's own permission bits otherwise.
		_ = os.Chmod(obj, f.ReadOnly())
	}
	m := manifest{Key: key, Outputs: files, Artifacts: sr.Artifacts, Results: sr.Results, ExitCode: sr.ExitCode, Details: sr.Details, Reads: sr.Reads}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.manifestPath(key)), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(c.manifestPath(key), b, 0o644)
}
