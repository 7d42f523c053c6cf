package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/gpuattest/gpuattest/attest/verify"
	"golang.org/x/sync/errgroup"
)

// Result is what Verify fetched, verified and wrote.
type Result struct {
	// Ref is the reference as given.
	Ref string `json:"ref"`
	// Source is the release fetched: REPOSITORY@sha256:<hex> or
	// oci-layout:DIR@sha256:<hex>.
	Source string `json:"source"`
	// Digest is the digest the source knows the release manifest by.
	Digest string `json:"digest"`
	// Referrers says how the referrers were found (ReferrersAPI,
	// ReferrersFallback or ReferrersLayout).
	Referrers string `json:"referrers"`
	// Files are the release's files as served: name, the sha256 of the
	// bytes received, and their size.
	Files []File `json:"files"`
	// Skipped are the referrers that are not Sigstore bundles (an SBOM,
	// a signature), by digest and artifactType; they are not checked.
	Skipped []string `json:"skipped_referrers,omitempty"`
	// Report is the verification's report.
	Report *verify.Report `json:"report"`
	// FilesDir is where the files were written (WithFilesTo), empty when
	// nothing was.
	FilesDir string `json:"files_dir,omitempty"`
	// LayoutDir is where the OCI layout copy was written (WithLayoutTo),
	// empty when nothing was.
	LayoutDir string `json:"layout_dir,omitempty"`
}

// Verify fetches the release ref names (a registry reference, or
// oci-layout:DIR[@sha256:<hex>], which reads nothing but DIR), its
// Sigstore bundle referrers and every layer, and verifies the bundles
// with v, with every file and the manifest, hashed as served, as the
// artifacts that must be subjects. A layer or manifest changed in the
// registry is therefore a subject mismatch, a changed bundle a signature
// failure. With WithFilesTo or WithLayoutTo the files or an OCI layout
// copy are written only when the report says verified, each directory
// whole; otherwise nothing is left behind.
//
// An error means nothing could be verified (ref not found, not a
// gpuattest release, a network failure, a bundle over v's limits) or the
// verified files could not be written; a failed verification is a Result
// whose Report says why.
func Verify(ctx context.Context, v *verify.Verifier, ref string, opts ...Option) (*Result, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, errors.New("verify: nil verifier")
	}
	st, err := newStage(o.filesTo, o.layoutTo)
	if err != nil {
		return nil, err
	}
	defer st.discard()
	src, err := openSource(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	defer src.close()
	f, err := fetch(ctx, src, v, st, o)
	if err != nil {
		return nil, err
	}
	res := &Result{Ref: ref, Source: src.name() + "@" + f.id.String(), Digest: f.id.String(), Referrers: f.how, Files: f.files, Skipped: f.skipped}
	if o.criteria != nil {
		o.criteria(Criteria{Source: res.Source, Bundles: len(f.entries), Criteria: v.Criteria(f.artifacts)})
	}
	res.Report = v.Verify(ctx, f.entries, f.artifacts)
	if !res.Report.Verified || ctx.Err() != nil {
		return res, nil
	}
	if err := st.commit(ctx, f.layoutIndex()); err != nil {
		return res, err
	}
	res.FilesDir, res.LayoutDir = o.filesTo, o.layoutTo
	return res, nil
}

// fetched is a release as read from a source.
type fetched struct {
	raw       []byte
	id        v1.Hash
	manifest  v1.Manifest
	how       string
	files     []File
	entries   []verify.Entry
	artifacts []verify.Artifact
	referrers []v1.Descriptor
	skipped   []string
	tag       string
}

// fetch reads the release, its bundles and its layers (into st when it
// stages anything).
func fetch(ctx context.Context, src source, v *verify.Verifier, st *stage, o *options) (*fetched, error) {
	raw, id, err := src.resolve(ctx)
	if err != nil {
		return nil, err
	}
	f := &fetched{raw: raw, id: id}
	if rs, ok := src.(*registrySource); ok {
		if t, ok := rs.ref.(name.Tag); ok {
			f.tag = t.TagStr()
		}
	}
	if f.manifest, err = parseRelease(raw, src.name()+"@"+id.String()); err != nil {
		return nil, err
	}
	for _, b := range [][]byte{raw, emptyJSON} {
		if err := st.blob(b); err != nil {
			return nil, err
		}
	}
	descs, how, err := src.referrers(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("listing the referrers of %s@%s: %w", src.name(), id, err)
	}
	f.how = how
	// The bundles and the layers download at once (nothing is verified
	// before both are in: the layers are staged). A bundle's error comes
	// first, unless it is the cancellation a layer's error caused.
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bundlesDone := make(chan error, 1)
	go func() {
		err := f.fetchBundles(bctx, src, descs, v, st, max(o.jobs, 8))
		if err != nil {
			cancel()
		}
		bundlesDone <- err
	}()
	files, lerr := fetchLayers(bctx, src, f.manifest.Layers, st, o.jobs)
	if lerr != nil {
		cancel()
	}
	if berr := <-bundlesDone; berr != nil && (lerr == nil || ctx.Err() != nil || !errors.Is(berr, context.Canceled)) {
		return nil, berr
	}
	if lerr != nil {
		return nil, lerr
	}
	f.files = files
	for _, fl := range f.files {
		f.artifacts = append(f.artifacts, verify.Artifact{Name: fl.Name, SHA256: fl.SHA256})
	}
	sum := sha256.Sum256(raw)
	f.artifacts = append(f.artifacts, verify.Artifact{Name: src.name() + "@" + id.String(), SHA256: hex.EncodeToString(sum[:])})
	return f, nil
}

// parseRelease decodes a release manifest and checks its layers' titles.
func parseRelease(raw []byte, source string) (v1.Manifest, error) {
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("%s: not an image manifest: %w", source, err)
	}
	if m.ArtifactType != ReleaseArtifactType {
		return m, fmt.Errorf("%s is not a gpuattest release: artifactType %q, expected %s\nhint: gpuattest push publishes releases", source, m.ArtifactType, ReleaseArtifactType)
	}
	if len(m.Layers) == 0 {
		return m, fmt.Errorf("%s: the release has no files", source)
	}
	var titles []string
	for i, l := range m.Layers {
		t := l.Annotations[AnnotationTitle]
		if err := CheckName(t); err != nil {
			return m, fmt.Errorf("%s: layer %d: %w", source, i+1, err)
		}
		if l.Digest.Algorithm != "sha256" || !hexSHA256.MatchString(l.Digest.Hex) || l.Size < 0 {
			return m, fmt.Errorf("%s: layer %d (%s): digest %s, size %d: expected sha256:<64 hex digits> and a size", source, i+1, t, l.Digest, l.Size)
		}
		titles = append(titles, t)
	}
	sort.Strings(titles)
	for i := 1; i < len(titles); i++ {
		if titles[i] == titles[i-1] {
			return m, fmt.Errorf("%s: two layers are titled %q", source, titles[i])
		}
	}
	if err := checkNesting(titles); err != nil {
		return m, fmt.Errorf("%s: %w", source, err)
	}
	return m, nil
}

// bundleRef is a bundle referrer being read.
type bundleRef struct {
	desc    v1.Descriptor
	raw     []byte
	layer   v1.Descriptor
	problem string
	data    []byte
}

// fetchBundles reads the bundle referrers, jobs at once, and lists them
// in digest order. A referrer whose manifest or bundle does not match its
// digest, or that is not one Sigstore bundle about this release, becomes
// an entry that fails the signature check; other referrers are skipped.
// Sizes are checked against v's limits before any bundle is read.
func (f *fetched) fetchBundles(ctx context.Context, src source, descs []v1.Descriptor, v *verify.Verifier, st *stage, jobs int) error {
	sort.Slice(descs, func(i, j int) bool { return descs[i].Digest.String() < descs[j].Digest.String() })
	raws := make([][]byte, len(descs))
	if err := forEach(ctx, jobs, len(descs), func(ctx context.Context, i int) (err error) {
		if raws[i], err = src.manifest(ctx, descs[i].Digest); err != nil {
			return fmt.Errorf("reading referrer %s@%s: %w", src.name(), descs[i].Digest, err)
		}
		return nil
	}); err != nil {
		return err
	}
	var refs []*bundleRef
	var total int64
	for i, d := range descs {
		if !isBundleReferrer(d, raws[i]) {
			f.skipped = append(f.skipped, d.Digest.String()+" ("+d.ArtifactType+")")
			continue
		}
		r := &bundleRef{desc: d, raw: raws[i]}
		r.layer, r.problem = f.bundleLayer(r.raw, &r.desc)
		if r.problem == "" && r.layer.Size > v.MaxBundleSize() {
			return fmt.Errorf("referrer %s@%s: its bundle is %d bytes, more than the %d a bundle may be\nhint: the limit follows --max-predicate-size", src.name(), d.Digest, r.layer.Size, v.MaxBundleSize())
		}
		if total += r.layer.Size; total > v.MaxBundlesSize() {
			return fmt.Errorf("the bundles of %s add up to more than %d bytes, the most one verification reads\nhint: the limit follows --max-predicate-size", src.name(), v.MaxBundlesSize())
		}
		refs = append(refs, r)
	}
	if err := forEach(ctx, jobs, len(refs), func(ctx context.Context, i int) (err error) {
		r := refs[i]
		if r.problem == "" {
			if r.data, r.problem, err = readBundle(ctx, src, r.layer); err != nil {
				return fmt.Errorf("reading the bundle of referrer %s@%s: %w", src.name(), r.desc.Digest, err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, r := range refs {
		f.entries = append(f.entries, verify.Entry{Source: src.name() + "@" + r.desc.Digest.String(), Data: r.data, Problem: r.problem})
		if r.problem != "" {
			continue
		}
		f.referrers = append(f.referrers, r.desc)
		for _, b := range [][]byte{r.raw, r.data} {
			if err := st.blob(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// forEach calls fn for 0..n-1, at most jobs at once, and returns the
// first error.
func forEach(ctx context.Context, jobs, n int, fn func(context.Context, int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	for i := range n {
		g.Go(func() error { return fn(gctx, i) })
	}
	return g.Wait()
}

// isBundleReferrer tells a Sigstore bundle referrer: by the artifactType
// the referrers list gives, or, where a registry lists the config's
// media type instead, by the manifest's own artifactType.
func isBundleReferrer(d v1.Descriptor, raw []byte) bool {
	if strings.HasPrefix(d.ArtifactType, bundleMediaTypePrefix) {
		return true
	}
	var m v1.Manifest
	if h, _, _ := v1.SHA256(bytes.NewReader(raw)); h != d.Digest || json.Unmarshal(raw, &m) != nil {
		return false
	}
	return strings.HasPrefix(m.ArtifactType, bundleMediaTypePrefix)
}

// bundleLayer checks a bundle referrer's manifest and returns its bundle
// layer, or what is wrong with it.
func (f *fetched) bundleLayer(raw []byte, d *v1.Descriptor) (v1.Descriptor, string) {
	if h, _, _ := v1.SHA256(bytes.NewReader(raw)); h != d.Digest {
		return v1.Descriptor{}, fmt.Sprintf("referrer manifest served as %s has digest %s: changed in the registry", d.Digest, h)
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return v1.Descriptor{}, "referrer is not an image manifest: " + err.Error()
	}
	switch {
	case m.Subject == nil || m.Subject.Digest != f.id:
		return v1.Descriptor{}, "referrer manifest's subject is not the release " + f.id.String()
	case len(m.Layers) != 1 || !strings.HasPrefix(string(m.Layers[0].MediaType), bundleMediaTypePrefix):
		return v1.Descriptor{}, "referrer manifest does not hold exactly one Sigstore bundle layer"
	case m.Layers[0].Digest.Algorithm != "sha256" || m.Layers[0].Size < 0:
		return v1.Descriptor{}, "referrer manifest's bundle layer has no sha256 digest and size"
	}
	// The layout copy lists it as the manifest says.
	d.ArtifactType, d.Annotations, d.Size = m.ArtifactType, m.Annotations, int64(len(raw))
	return m.Layers[0], ""
}

// readBundle reads a bundle blob of at most its descriptor's size and
// says so when the bytes do not match the digest.
func readBundle(ctx context.Context, src source, layer v1.Descriptor) ([]byte, string, error) {
	rc, err := src.blob(ctx, layer.Digest)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, layer.Size+1))
	if err != nil {
		return nil, "", err
	}
	if h, _, _ := v1.SHA256(bytes.NewReader(data)); h != layer.Digest {
		return nil, fmt.Sprintf("bundle blob served as %s has digest %s: changed in the registry", layer.Digest, h), nil
	}
	return data, "", nil
}

// fetchLayers reads every layer, at most jobs at once, hashing what is
// served (at most one byte more than the manifest says) and staging it.
func fetchLayers(ctx context.Context, src source, layers []v1.Descriptor, st *stage, jobs int) ([]File, error) {
	files := make([]File, len(layers))
	err := forEach(ctx, jobs, len(layers), func(ctx context.Context, i int) error {
		l := layers[i]
		title := l.Annotations[AnnotationTitle]
		rc, err := src.blob(ctx, l.Digest)
		if err != nil {
			return fmt.Errorf("fetching %s (%s): %w", title, l.Digest, err)
		}
		defer rc.Close()
		sum, n, err := st.layer(ctx, title, io.LimitReader(rc, l.Size+1))
		if err != nil {
			return fmt.Errorf("fetching %s (%s): %w", title, l.Digest, err)
		}
		files[i] = File{Name: title, SHA256: sum, Size: n}
		return nil
	})
	return files, err
}

// layoutIndex is index.json's list for a layout copy: the release (with
// its tag, and marked for cosign's --local-image) and its bundle
// referrers.
func (f *fetched) layoutIndex() []v1.Descriptor {
	ann := map[string]string{cosignKindAnnotation: cosignKindImage}
	if f.tag != "" {
		ann["org.opencontainers.image.ref.name"] = f.tag
	}
	h, n, _ := v1.SHA256(bytes.NewReader(f.raw))
	out := []v1.Descriptor{{MediaType: types.OCIManifestSchema1, Digest: h, Size: n, ArtifactType: ReleaseArtifactType, Annotations: ann}}
	for _, d := range f.referrers {
		out = append(out, v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: d.Digest, Size: d.Size, ArtifactType: d.ArtifactType, Annotations: d.Annotations})
	}
	return out
}
