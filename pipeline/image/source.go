package image

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SourceKind says where an image comes from.
type SourceKind string

// The kinds of image source.
const (
	// Registry is a registry reference such as ubuntu:22.04.
	Registry SourceKind = "registry"
	// OCILayout is an OCI image layout directory: oci-layout:PATH[@sha256:...].
	OCILayout SourceKind = "oci-layout"
	// DockerArchive is a `docker save` tarball: docker-archive:PATH[@sha256:...].
	DockerArchive SourceKind = "docker-archive"
)

// Source is a parsed image source.
type Source struct {
	// Kind is the kind of source.
	Kind SourceKind
	// Raw is the source as written.
	Raw string
	// Ref is the registry reference (Registry only).
	Ref name.Reference
	// Path is the layout directory or tarball (OCILayout, DockerArchive),
	// as written.
	Path string
	// Digest is the digest the source pins ("sha256:<hex>"), or "" when the
	// source floats (a tag, or a path without @digest).
	Digest string
	// Tag is the tag of a registry reference ("latest" when none was
	// written and no digest was); "" for other kinds.
	Tag string
}

// Floating reports whether the source names no digest, so what it points to
// can change (a tag, or a file path without @sha256:...).
func (s Source) Floating() bool { return s.Digest == "" }

// String returns the source as written.
func (s Source) String() string { return s.Raw }

// ParseSource parses an image source: a registry reference,
// oci-layout:PATH[@sha256:...] or docker-archive:PATH[@sha256:...].
func ParseSource(src string) (Source, error) {
	s := Source{Raw: src}
	if strings.TrimSpace(src) != src || src == "" {
		return s, fmt.Errorf("image source %q: empty or surrounded by spaces\nhint: write a registry reference (repo:tag or repo@sha256:...), oci-layout:PATH or docker-archive:PATH", src)
	}
	for _, k := range []SourceKind{OCILayout, DockerArchive} {
		rest, ok := strings.CutPrefix(src, string(k)+":")
		if !ok {
			continue
		}
		s.Kind = k
		p, dig := rest, ""
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			p, dig = rest[:i], rest[i+1:]
			h, err := v1.NewHash(dig)
			if err != nil || h.Algorithm != "sha256" {
				return s, fmt.Errorf("image source %q: %q is not a sha256 digest\nhint: write %s:PATH@sha256:<64 hex digits>", src, dig, k)
			}
		}
		if p == "" {
			return s, fmt.Errorf("image source %q: missing path\nhint: write %s:PATH", src, k)
		}
		s.Path, s.Digest = p, dig
		return s, nil
	}
	if i := strings.Index(src, "://"); i >= 0 {
		return s, fmt.Errorf("image source %q: unknown scheme %q\nhint: registry references have no scheme (127.0.0.1:5000/repo:tag); files are oci-layout:PATH or docker-archive:PATH", src, src[:i])
	}
	ref, err := name.ParseReference(src)
	if err != nil {
		return s, fmt.Errorf("image source %q: not a valid registry reference: %v\nhint: write repo:tag, repo@sha256:<hex>, oci-layout:PATH or docker-archive:PATH", src, err)
	}
	s.Kind, s.Ref = Registry, ref
	switch r := ref.(type) {
	case name.Digest:
		s.Digest = r.DigestStr()
		// name.Digest drops a tag written before the digest; keep it for display.
		if before, _, ok := strings.Cut(src, "@"); ok {
			if t, err := name.NewTag(before); err == nil && strings.Contains(lastPathElem(before), ":") {
				s.Tag = t.TagStr()
			}
		}
	case name.Tag:
		s.Tag = r.TagStr()
	}
	return s, nil
}

func lastPathElem(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// absPath resolves a file source's path against the base directory.
func (o *options) absPath(p string) string {
	if filepath.IsAbs(p) || o.baseDir == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(o.baseDir, p)
}
