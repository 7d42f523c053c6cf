package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ErrNotFound reports that a source does not (or no longer) serve the image
// or digest asked for. Callers branch on it with errors.Is.
var ErrNotFound = errors.New("image not found")

// Resolved is an image source resolved to digests.
type Resolved struct {
	// Reference is the source as written.
	Reference string `json:"reference"`
	// IndexDigest is the digest of the multi-platform index the source
	// pointed at, or "" when it pointed at a single manifest.
	IndexDigest string `json:"index_digest,omitempty"`
	// ManifestDigest is the digest of the platform's image manifest. For a
	// docker-archive source, which carries no registry manifest, it is the
	// image ID (the config digest) that `docker load` reports.
	ManifestDigest string `json:"manifest_digest"`
	// ConfigDigest is the digest of the image's config (its image ID).
	ConfigDigest string `json:"config_digest"`
	// Platform is the platform resolved for, such as linux/amd64.
	Platform string `json:"platform"`
	// ResolvedAt is when the source was resolved.
	ResolvedAt time.Time `json:"resolved_at"`
	// Source is the parsed source.
	Source Source `json:"-"`
}

// Pinned returns the resolved image pinned to its digests, for runners:
// its Source is repo@sha256:<manifest> for a registry,
// oci-layout:PATH@sha256:<manifest> or docker-archive:PATH@sha256:<image id>
// for files (PATH as written). It has no Name.
func (r *Resolved) Pinned() Pinned {
	return newPinned("", r.Reference, r.Source, r.ManifestDigest, r.IndexDigest, r.ConfigDigest, r.Platform)
}

func pinned(s Source, digest string) string {
	switch s.Kind {
	case Registry:
		return s.Ref.Context().Name() + "@" + digest
	default:
		return string(s.Kind) + ":" + s.Path + "@" + digest
	}
}

// Resolve resolves an image source to digests without downloading layers.
func Resolve(ctx context.Context, src string, opts ...Option) (*Resolved, error) {
	_, r, err := Pull(ctx, src, opts...)
	return r, err
}

// Pull resolves an image source and returns its image for the configured
// platform (linux/amd64 unless WithPlatform). Layers are fetched lazily, when
// read (Extract reads them). A source pinned by digest is verified to serve
// exactly that digest.
func Pull(ctx context.Context, src string, opts ...Option) (v1.Image, *Resolved, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	s, err := ParseSource(src)
	if err != nil {
		return nil, nil, err
	}
	var (
		img v1.Image
		res = &Resolved{Reference: src, Source: s, ResolvedAt: o.now().UTC()}
	)
	switch s.Kind {
	case Registry:
		img, err = o.pullRemote(ctx, s, res)
	case OCILayout:
		img, err = o.pullLayout(s, res)
	case DockerArchive:
		img, err = o.pullArchive(s, res)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resolving image %q: %w", src, err)
	}
	cfgDigest, err := o.checkConfig(img, s.Kind != DockerArchive)
	if err != nil {
		return nil, nil, fmt.Errorf("resolving image %q: %w", src, err)
	}
	res.ConfigDigest = cfgDigest
	res.Platform = o.platform.String()
	if s.Kind == DockerArchive {
		res.ManifestDigest = cfgDigest
		if s.Digest != "" && s.Digest != cfgDigest {
			return nil, nil, fmt.Errorf("resolving image %q: %w: the archive holds image %s, not %s\nhint: the file changed since it was pinned; run gpuattest lock --update FILE if the new image is intended", src, ErrNotFound, cfgDigest, s.Digest)
		}
	}
	o.logger.Debug("resolved image", "reference", src, "index", res.IndexDigest, "manifest", res.ManifestDigest, "platform", res.Platform)
	return img, res, nil
}

func (o *options) remoteOptions(ctx context.Context) []remote.Option {
	ro := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(o.keychain),
		remote.WithPlatform(o.platform),
	}
	if o.transport != nil {
		ro = append(ro, remote.WithTransport(o.transport))
	}
	return ro
}

func (o *options) pullRemote(ctx context.Context, s Source, res *Resolved) (v1.Image, error) {
	desc, err := remote.Get(s.Ref, o.remoteOptions(ctx)...)
	if err != nil {
		return nil, remoteErr(s.Ref, err)
	}
	switch {
	case desc.MediaType.IsIndex():
		res.IndexDigest = desc.Digest.String()
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, remoteErr(s.Ref, err)
		}
		img, d, err := o.fromIndex(idx)
		if err != nil {
			return nil, err
		}
		res.ManifestDigest = d.String()
		return img, nil
	case desc.MediaType.IsImage():
		res.ManifestDigest = desc.Digest.String()
		img, err := desc.Image()
		if err != nil {
			return nil, remoteErr(s.Ref, err)
		}
		return img, nil
	case desc.MediaType.IsSchema1():
		return nil, fmt.Errorf("%s is a docker schema 1 manifest, which carries no content digests\nhint: push the image again with a current docker or crane", s.Ref)
	default:
		return nil, fmt.Errorf("%s has media type %q, not an image or an index", s.Ref, desc.MediaType)
	}
}

// remoteErr turns a registry error into ours, marking "not there" with
// ErrNotFound.
func remoteErr(ref name.Reference, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		notFound := te.StatusCode == http.StatusNotFound
		for _, d := range te.Errors {
			notFound = notFound || d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode
		}
		if notFound {
			return fmt.Errorf("%w: %s is not served by %s (%v)\nhint: check the reference; `crane ls %s` lists the repository's tags", ErrNotFound, ref, ref.Context().RegistryStr(), err, ref.Context())
		}
		if te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden {
			return fmt.Errorf("fetching %s: %w\nhint: log in with `docker login %s` (credentials come from the docker config)", ref, err, ref.Context().RegistryStr())
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("fetching %s: %w\nhint: is the registry %s reachable from here? For an air-gapped machine, carry the image as oci-layout:PATH or docker-archive:PATH", ref, err, ref.Context().RegistryStr())
	}
	return fmt.Errorf("fetching %s: %w", ref, err)
}

// fromIndex picks the configured platform's image out of an index.
func (o *options) fromIndex(idx manifestLister) (v1.Image, v1.Hash, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("reading index: %w", err)
	}
	d, err := o.pickPlatform(im.Manifests)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if d.MediaType.IsIndex() {
		return nil, v1.Hash{}, fmt.Errorf("index entry %s for %s is itself an index; nested indexes are not supported\nhint: pin the platform's manifest digest", d.Digest, o.platform)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("reading manifest %s: %w", d.Digest, err)
	}
	return img, d.Digest, nil
}

func (o *options) pickPlatform(ds []v1.Descriptor) (v1.Descriptor, error) {
	var seen []string
	for _, d := range ds {
		if d.Platform == nil {
			continue
		}
		if d.Platform.OS == "unknown" { // attestation manifests
			continue
		}
		seen = append(seen, d.Platform.String())
		if d.Platform.Satisfies(o.platform) {
			return d, nil
		}
	}
	if len(seen) == 0 {
		return v1.Descriptor{}, fmt.Errorf("%w: the index has no entry with a platform, so none can be picked for %s\nhint: pin the manifest digest (@sha256:...)", ErrNotFound, o.platform)
	}
	return v1.Descriptor{}, fmt.Errorf("%w: no %s image in the index (it has %s)", ErrNotFound, o.platform, strings.Join(seen, ", "))
}

func (o *options) pullLayout(s Source, res *Resolved) (v1.Image, error) {
	dir := o.absPath(s.Path)
	lp, err := layout.FromPath(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s is not an OCI image layout (no index.json)\nhint: write one with `crane pull --format=oci REF DIR` or `skopeo copy docker://REF oci:DIR`", dir)
		}
		return nil, err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading %s/index.json: %w", dir, err)
	}
	var (
		parent v1.ImageIndex
		d      v1.Descriptor
	)
	if s.Digest != "" {
		h, _ := v1.NewHash(s.Digest)
		var ok bool
		parent, d, ok, err = findInLayout(top, h, 0)
		if err != nil {
			return nil, fmt.Errorf("searching %s: %w", dir, err)
		}
		if !ok {
			// Not listed in index.json any more; the blob may still be there.
			img, idx, err := unlistedBlob(lp, h)
			switch {
			case errors.Is(err, os.ErrNotExist):
				return nil, fmt.Errorf("%w: %s holds no manifest or index %s", ErrNotFound, dir, s.Digest)
			case err != nil:
				return nil, err
			case idx != nil:
				res.IndexDigest = h.String()
				img, d, err := o.fromIndex(idx)
				if err != nil {
					return nil, err
				}
				res.ManifestDigest = d.String()
				return img, nil
			default:
				res.ManifestDigest = h.String()
				return img, nil
			}
		}
	} else {
		im, err := top.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("reading %s/index.json: %w", dir, err)
		}
		switch len(im.Manifests) {
		case 0:
			return nil, fmt.Errorf("%w: %s/index.json lists no image", ErrNotFound, dir)
		case 1:
			d = im.Manifests[0]
		default:
			if d, err = o.pickPlatform(im.Manifests); err != nil {
				return nil, fmt.Errorf("%s holds %d images: %w\nhint: pin one with oci-layout:%s@sha256:...", dir, len(im.Manifests), err, s.Path)
			}
		}
		parent = top
	}
	if err := verifyBlob(lp, d.Digest); err != nil {
		return nil, err
	}
	if d.MediaType.IsIndex() {
		res.IndexDigest = d.Digest.String()
		idx, err := parent.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("reading index %s: %w", d.Digest, err)
		}
		img, h, err := o.fromIndex(idx)
		if err != nil {
			return nil, err
		}
		if err := verifyBlob(lp, h); err != nil {
			return nil, err
		}
		res.ManifestDigest = h.String()
		return img, nil
	}
	if !d.MediaType.IsImage() {
		return nil, fmt.Errorf("%s in %s has media type %q, not an image or an index", d.Digest, dir, d.MediaType)
	}
	img, err := parent.Image(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", d.Digest, err)
	}
	res.ManifestDigest = d.Digest.String()
	return img, nil
}

// findInLayout looks for a manifest or index with digest h in idx and the
// indexes it holds; it returns the index that lists it.
func findInLayout(idx v1.ImageIndex, h v1.Hash, depth int) (v1.ImageIndex, v1.Descriptor, bool, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Descriptor{}, false, err
	}
	for _, d := range im.Manifests {
		if d.Digest == h {
			return idx, d, true, nil
		}
	}
	if depth >= 3 {
		return nil, v1.Descriptor{}, false, nil
	}
	for _, d := range im.Manifests {
		if !d.MediaType.IsIndex() {
			continue
		}
		sub, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, v1.Descriptor{}, false, err
		}
		if p, found, ok, err := findInLayout(sub, h, depth+1); ok || err != nil {
			return p, found, ok, err
		}
	}
	return nil, v1.Descriptor{}, false, nil
}

// verifyBlob checks that a layout blob's bytes hash to its name: a layout
// is a directory anyone could have edited.
func verifyBlob(lp layout.Path, h v1.Hash) error {
	b, err := lp.Bytes(h)
	if err != nil {
		return fmt.Errorf("reading blob %s: %w", h, err)
	}
	got, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if got != h {
		return fmt.Errorf("blob %s in %s is corrupt: its bytes hash to %s", h, lp, got)
	}
	return nil
}

func (o *options) pullArchive(s Source, _ *Resolved) (v1.Image, error) {
	p := o.absPath(s.Path)
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("opening docker archive: %w\nhint: write one with `docker save -o FILE REF`", err)
	}
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		return nil, fmt.Errorf("reading docker archive %s: %w\nhint: the archive must hold exactly one image (docker save -o FILE REF)", p, err)
	}
	return archiveImage{img}, nil
}

// checkConfig verifies the config blob against the digest the manifest
// names and that the image is for the wanted platform; it returns the config
// digest.
//
// A docker archive has no manifest of its own (go-containerregistry would
// synthesise one by compressing every layer), so withManifest is false for it.
func (o *options) checkConfig(img v1.Image, withManifest bool) (string, error) {
	raw, err := img.RawConfigFile()
	if err != nil {
		return "", fmt.Errorf("reading image config: %w", err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	if withManifest {
		m, err := img.Manifest()
		if err != nil {
			return "", fmt.Errorf("reading manifest: %w", err)
		}
		if m.Config.Digest != h {
			return "", fmt.Errorf("image config hashes to %s but the manifest names %s", h, m.Config.Digest)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("parsing image config: %w", err)
	}
	if cf.OS != "" && cf.Architecture != "" {
		got := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		if !got.Satisfies(o.platform) {
			return "", fmt.Errorf("image is for %s, not %s\nhint: pick the %s image of the index, or pass the platform you mean", got.String(), o.platform.String(), o.platform.String())
		}
	}
	return h.String(), nil
}
