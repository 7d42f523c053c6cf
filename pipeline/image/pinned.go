package image

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Pinned is an image pinned to digests. A Pinner makes one from the lock
// (or by resolving the source), the engine hands it to the step's runner
// (runner.Command.Image) and records it in run.json, and the attestations
// name the image by its URI. The zero value means "no image" (IsZero).
//
// Source is what runners use: repo@sha256:<manifest>,
// oci-layout:PATH@sha256:<manifest> or docker-archive:PATH@sha256:<image id>,
// with PATH absolute once a Pinner made it. Its Digest is the manifest
// digest. A file source's path is for this machine only: URI never
// contains it.
type Pinned struct {
	// Name is the image's key under images: in the pipeline ("" for an
	// image pinned outside a pipeline).
	Name string
	// Reference is the source as the pipeline writes it.
	Reference string
	// Source is the digest-pinned source that runners use.
	Source Source
	// IndexDigest is the multi-platform index the reference pointed at,
	// or "" when it pointed at a single manifest (or is not known).
	IndexDigest string
	// ConfigDigest is the image's config digest, its image ID ("" when
	// not known, as for ParsePinned of a registry or oci-layout source).
	ConfigDigest string
	// Platform is the platform the image was resolved for (linux/amd64),
	// "" when not known.
	Platform string
}

// IsZero reports whether p names no image.
func (p Pinned) IsZero() bool { return p.Source.Raw == "" }

// ManifestDigest returns the digest of the platform's image manifest
// ("sha256:<hex>"); for a docker-archive source, which has no registry
// manifest, the image ID. It is "" when p is not pinned.
func (p Pinned) ManifestDigest() string { return p.Source.Digest }

// String returns the pinned source as runners use it (it may hold a local
// path; see URI for the name attestations use).
func (p Pinned) String() string { return p.Source.Raw }

// URI names the image in attestations, never by a local path: a registry
// image as oci://REPO@sha256:<manifest>; an image carried as a file
// (oci-layout:, docker-archive:) by digest alone, as the package URL
// pkg:oci/NAME@sha256%3A<manifest hex> (NAME is the image's name in the
// pipeline). "" when p is not pinned.
func (p Pinned) URI() string {
	if p.IsZero() || p.Source.Floating() {
		return ""
	}
	if p.Source.Kind == Registry {
		return "oci://" + p.Source.Raw
	}
	n := strings.ToLower(p.Name)
	if n == "" {
		n = "image"
	}
	alg, hex, _ := strings.Cut(p.Source.Digest, ":")
	return "pkg:oci/" + url.PathEscape(n) + "@" + alg + "%3A" + hex
}

// pinnedJSON is Pinned's form in run.json.
type pinnedJSON struct {
	Name           string `json:"name"`
	Reference      string `json:"reference"`
	Pinned         string `json:"pinned"`
	IndexDigest    string `json:"index_digest,omitempty"`
	ManifestDigest string `json:"manifest_digest,omitempty"`
	ConfigDigest   string `json:"config_digest,omitempty"`
	Platform       string `json:"platform,omitempty"`
}

// MarshalJSON writes p as {"name", "reference", "pinned", "index_digest",
// "manifest_digest", "config_digest", "platform"}.
func (p Pinned) MarshalJSON() ([]byte, error) {
	return json.Marshal(pinnedJSON{
		Name: p.Name, Reference: p.Reference, Pinned: p.Source.Raw,
		IndexDigest: p.IndexDigest, ManifestDigest: p.ManifestDigest(),
		ConfigDigest: p.ConfigDigest, Platform: p.Platform,
	})
}

// UnmarshalJSON reads what MarshalJSON writes; "pinned" is parsed with
// ParseSource, and manifest_digest, when present, must be its digest.
func (p *Pinned) UnmarshalJSON(b []byte) error {
	var j pinnedJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Pinned{Name: j.Name, Reference: j.Reference, IndexDigest: j.IndexDigest, ConfigDigest: j.ConfigDigest, Platform: j.Platform}
	if j.Pinned != "" {
		s, err := ParseSource(j.Pinned)
		if err != nil {
			return fmt.Errorf("image %s: pinned: %w", j.Name, err)
		}
		out.Source = s
	}
	if j.ManifestDigest != "" && j.ManifestDigest != out.ManifestDigest() {
		return fmt.Errorf("image %s: manifest_digest %s differs from the digest of %q", j.Name, j.ManifestDigest, j.Pinned)
	}
	*p = out
	return nil
}

// ParsePinned parses a source that names its digest (repo@sha256:...,
// oci-layout:PATH@sha256:..., docker-archive:PATH@sha256:...) as a Pinned
// whose manifest digest is that digest. Index and config digests are not
// known from the text (a docker-archive's digest is its config digest).
// A source without a digest is an error.
func ParsePinned(src string) (Pinned, error) {
	s, err := ParseSource(src)
	if err != nil {
		return Pinned{}, fmt.Errorf("image %q is not pinned by digest: %w", src, err)
	}
	if s.Floating() {
		return Pinned{}, fmt.Errorf("image %q is not pinned by digest\nhint: write NAME@sha256:<digest> (or oci-layout:PATH@sha256:...); gpuattest lock resolves tags to digests", src)
	}
	return newPinned("", src, s, s.Digest, "", "", ""), nil
}

// newPinned pins s (as parsed from reference) to the manifest digest.
func newPinned(name, reference string, s Source, manifest, index, config, platform string) Pinned {
	if s.Kind == DockerArchive && config == "" {
		config = manifest // a docker archive is pinned by its image ID
	}
	return Pinned{
		Name: name, Reference: reference, Source: pinSource(s, manifest),
		IndexDigest: index, ConfigDigest: config, Platform: platform,
	}
}

// pinSource returns s pinned to digest: repo@digest for a registry,
// KIND:PATH@digest for files.
func pinSource(s Source, digest string) Source {
	out := Source{Kind: s.Kind, Raw: pinned(s, digest), Path: s.Path, Digest: digest}
	if s.Kind == Registry {
		out.Ref = s.Ref.Context().Digest(digest)
	}
	return out
}

// withAbsPath makes the path of a file source absolute (against
// WithBaseDir), so that runners need no base directory of their own.
func (p Pinned) withAbsPath(o *options) Pinned {
	if p.Source.Kind == Registry || p.IsZero() {
		return p
	}
	s := p.Source
	s.Path = o.absPath(s.Path)
	p.Source = pinSource(s, s.Digest)
	return p
}

// PullPinned pulls the pinned image p for its platform (see Pull) and
// checks that it has the config digest p records, when it records one.
// A floating p is refused.
func PullPinned(ctx context.Context, p Pinned, opts ...Option) (v1.Image, *Resolved, error) {
	if p.IsZero() || p.Source.Floating() {
		return nil, nil, fmt.Errorf("image %q is not pinned by digest\nhint: use NAME@sha256:<digest> (or oci-layout:PATH@sha256:...); gpuattest lock resolves tags to digests", p.String())
	}
	if p.Platform != "" {
		opts = append(append([]Option(nil), opts...), WithPlatform(p.Platform))
	}
	img, res, err := Pull(ctx, p.Source.Raw, opts...)
	if err != nil {
		return nil, nil, err
	}
	if p.ConfigDigest != "" && res.ConfigDigest != p.ConfigDigest {
		return nil, nil, fmt.Errorf("image %s: its config digest is %s, not the pinned %s\nhint: the source changed since it was locked; run gpuattest lock --update FILE if the new image is intended", p.String(), res.ConfigDigest, p.ConfigDigest)
	}
	return img, res, nil
}
