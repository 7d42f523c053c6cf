package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/internal/limits"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/jsonstrict"
)

// LockFileName is the name of the lock file, written beside the pipeline.
const LockFileName = "gpuattest.lock"

// LockAPIVersion is the apiVersion of lock files this release reads.
const LockAPIVersion = "gpuattest.dev/v1"

// KindLock is the kind of a lock document.
const KindLock = "Lock"

// Lock is the content of gpuattest.lock: every image of a pipeline, by name,
// resolved to digests.
type Lock struct {
	// APIVersion is LockAPIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is KindLock.
	Kind string `json:"kind"`
	// Images holds one entry per image of the pipeline, sorted by name.
	Images []LockEntry `json:"images"`
}

// LockEntry records how one image of the pipeline was resolved.
type LockEntry struct {
	// Name is the image's key under images: in the pipeline.
	Name string `json:"name"`
	// Reference is the source as the pipeline writes it.
	Reference string `json:"reference"`
	// IndexDigest is the multi-platform index's digest, when the reference
	// pointed at one.
	IndexDigest string `json:"index_digest,omitempty"`
	// ManifestDigest is the platform's manifest digest (for docker-archive
	// sources, the image ID).
	ManifestDigest string `json:"manifest_digest"`
	// ConfigDigest is the image's config digest (its image ID).
	ConfigDigest string `json:"config_digest,omitempty"`
	// Platform is the platform resolved for (linux/amd64).
	Platform string `json:"platform"`
	// ResolvedAt is when the reference was resolved.
	ResolvedAt time.Time `json:"resolved_at"`
}

// EntryFor returns the lock entry recording r under name.
func EntryFor(name string, r *Resolved) LockEntry {
	return LockEntry{
		Name:           name,
		Reference:      r.Reference,
		IndexDigest:    r.IndexDigest,
		ManifestDigest: r.ManifestDigest,
		ConfigDigest:   r.ConfigDigest,
		Platform:       r.Platform,
		ResolvedAt:     r.ResolvedAt.UTC(),
	}
}

// Pinned returns the image this entry pins, with all its digests; its
// Source is what runners use (repo@sha256:<manifest>, oci-layout:PATH@...,
// docker-archive:PATH@..., PATH as written).
func (e LockEntry) Pinned() (Pinned, error) {
	s, err := ParseSource(e.Reference)
	if err != nil {
		return Pinned{}, fmt.Errorf("lock entry %q: %w", e.Name, err)
	}
	return newPinned(e.Name, e.Reference, s, e.ManifestDigest, e.IndexDigest, e.ConfigDigest, e.Platform), nil
}

// NewLock returns an empty lock.
func NewLock() *Lock { return &Lock{APIVersion: LockAPIVersion, Kind: KindLock, Images: []LockEntry{}} }

// LockPath returns the lock file that belongs to the pipeline file at
// pipelinePath: gpuattest.lock in the same directory.
func LockPath(pipelinePath string) string {
	return filepath.Join(filepath.Dir(pipelinePath), LockFileName)
}

// Entry returns the entry for the image called name.
func (l *Lock) Entry(name string) (LockEntry, bool) {
	if l == nil {
		return LockEntry{}, false
	}
	for _, e := range l.Images {
		if e.Name == name {
			return e, true
		}
	}
	return LockEntry{}, false
}

// Set adds or replaces the entry with e's name, keeping entries sorted.
func (l *Lock) Set(e LockEntry) {
	for i := range l.Images {
		if l.Images[i].Name == e.Name {
			l.Images[i] = e
			return
		}
	}
	l.Images = append(l.Images, e)
	sort.Slice(l.Images, func(i, j int) bool { return l.Images[i].Name < l.Images[j].Name })
}

// ReadLock reads and validates a lock file. A missing file gives an error
// that matches os.ErrNotExist.
func ReadLock(path string) (*Lock, error) {
	b, err := limits.ReadFile(path, limits.LockBytes, "lock file")
	if err != nil {
		return nil, fmt.Errorf("reading lock: %w", err)
	}
	return ParseLock(b, path)
}

var digestRE = lazyregexp.New(`^sha256:[a-f0-9]{64}$`)

// maxLockDepth is the deepest nesting a lock file may have; it needs
// three.
const maxLockDepth = 16

// lockHint ends the problems of a lock file.
const lockHint = "regenerate it with `gpuattest lock --update PIPELINE`"

// ParseLock decodes and validates a lock document the way gpuattest reads
// every document (strictly, then Validate); filename names it in errors.
// Every problem is reported at once, in a problem.List, with its line:col
// (syntax, shape) or field path.
func ParseLock(data []byte, filename string) (*Lock, error) {
	var l Lock
	probs := jsonstrict.Read(filename, data, maxLockDepth, &l)
	if len(probs) > 0 {
		probs[len(probs)-1].Hint = lockHint
		return nil, probs
	}
	if l.Images == nil {
		l.Images = []LockEntry{}
	}
	return &l, nil
}

// Validate returns every problem of a decoded lock, each with its field
// path (images[1].manifest_digest).
func (l *Lock) Validate() problem.List {
	var v problem.List
	if l.APIVersion != LockAPIVersion {
		v.Add("apiVersion", "", "%q: expected %q", l.APIVersion, LockAPIVersion)
	}
	if l.Kind != KindLock {
		v.Add("kind", "", "%q: expected %q", l.Kind, KindLock)
	}
	seen := map[string]int{}
	for i, e := range l.Images {
		p := fmt.Sprintf("images[%d]", i)
		if e.Name == "" {
			v.Add(p+".name", "", "missing")
		} else if j, dup := seen[e.Name]; dup {
			v.Add(p+".name", "", "%q already locked by images[%d]", e.Name, j)
		} else {
			seen[e.Name] = i
		}
		if _, err := ParseSource(e.Reference); err != nil {
			v.Add(p+".reference", "", "%v", err)
		}
		if !digestRE.MatchString(e.ManifestDigest) {
			v.Add(p+".manifest_digest", "", "%q: expected sha256:<64 hex digits>", e.ManifestDigest)
		}
		if e.IndexDigest != "" && !digestRE.MatchString(e.IndexDigest) {
			v.Add(p+".index_digest", "", "%q: expected sha256:<64 hex digits>", e.IndexDigest)
		}
		if e.ConfigDigest != "" && !digestRE.MatchString(e.ConfigDigest) {
			v.Add(p+".config_digest", "", "%q: expected sha256:<64 hex digits>", e.ConfigDigest)
		}
		if e.Platform == "" {
			v.Add(p+".platform", "", "missing")
		}
		if e.ResolvedAt.IsZero() {
			v.Add(p+".resolved_at", "", "missing")
		}
	}
	return v
}

// Marshal returns the lock as indented JSON with a trailing newline, entries
// sorted by name.
func (l *Lock) Marshal() ([]byte, error) {
	c := *l
	c.Images = slices.Clone(l.Images)
	if c.Images == nil {
		c.Images = []LockEntry{}
	}
	sort.Slice(c.Images, func(i, j int) bool { return c.Images[i].Name < c.Images[j].Name })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write writes the lock to path atomically: a temporary file in the same
// directory, synced, then renamed over path.
func (l *Lock) Write(path string) error {
	b, err := l.Marshal()
	if err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("writing lock: %w", err)
	}
	return nil
}

// Change says what locking did to one image.
type Change struct {
	// Name is the image's name.
	Name string `json:"name"`
	// Action is "added", "kept" (existing entry, not re-resolved),
	// "unchanged" (re-resolved to the same digests), "updated" or
	// "removed" (the pipeline no longer has the image).
	Action string `json:"action"`
	// Entry is the entry now in the lock (the removed one for "removed").
	Entry LockEntry `json:"entry"`
	// Previous is the entry replaced by "updated".
	Previous *LockEntry `json:"previous,omitempty"`
}

// LockImages resolves images (name to source) into a lock, starting from
// existing (nil when there is no lock yet). Without update an existing entry
// whose reference and platform still match is kept as is; a changed
// reference or platform is always re-resolved; entries of images the
// pipeline no longer has are dropped.
// When any image fails to resolve, the error names each failure and no lock
// is returned.
func LockImages(ctx context.Context, images map[string]string, existing *Lock, update bool, opts ...Option) (*Lock, []Change, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	names := sortedKeys(images)
	out := NewLock()
	var changes []Change
	var errs []error
	for _, n := range names {
		ref := images[n]
		old, had := existing.Entry(n)
		if had && old.Reference == ref && old.Platform == o.platform.String() && !update {
			out.Set(old)
			changes = append(changes, Change{Name: n, Action: "kept", Entry: old})
			continue
		}
		r, err := Resolve(ctx, ref, opts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("images.%s: %w", n, err))
			continue
		}
		e := EntryFor(n, r)
		switch {
		case !had:
			changes = append(changes, Change{Name: n, Action: "added", Entry: e})
		case sameDigests(old, e):
			e = old
			changes = append(changes, Change{Name: n, Action: "unchanged", Entry: e})
		default:
			prev := old
			changes = append(changes, Change{Name: n, Action: "updated", Entry: e, Previous: &prev})
		}
		out.Set(e)
	}
	if existing != nil {
		for _, e := range existing.Images {
			if _, ok := images[e.Name]; !ok {
				changes = append(changes, Change{Name: e.Name, Action: "removed", Entry: e})
			}
		}
	}
	if len(errs) > 0 {
		return nil, changes, errors.Join(errs...)
	}
	o.logger.Debug("locked images", "count", len(out.Images))
	return out, changes, nil
}

func sameDigests(a, b LockEntry) bool {
	return a.Reference == b.Reference && a.IndexDigest == b.IndexDigest && a.ManifestDigest == b.ManifestDigest && a.Platform == b.Platform
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// shortDigest abbreviates sha256:<hex> for messages.
func shortDigest(d string) string {
	if h, ok := strings.CutPrefix(d, "sha256:"); ok && len(h) > 12 {
		return "sha256:" + h[:12]
	}
	return d
}
