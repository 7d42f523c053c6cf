package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"golang.org/x/sync/errgroup"
)

// Bounds of the referrers read.
const (
	// maxReferrers is the most referrers of a release listed (each one
	// listed is counted, fetched or not).
	maxReferrers = 100_000
	// maxReferrerManifest is the largest referrer manifest fetched: a
	// bundle referrer's is under 2 KiB; a referrer listed as larger is
	// not a bundle and is dropped unread.
	maxReferrerManifest = 64 << 10
	// maxSkippedListed is how many skipped referrers Result.Skipped
	// lists; SkippedCount counts them all.
	maxSkippedListed = 100
)

// Result is what Verify fetched, verified and wrote.
type Result struct {
	// Ref is the reference as given.
	Ref string `json:"ref"`
	// Source is the release fetched: REPOSITORY@sha256:<hex> or
	// oci-layout:DIR@sha256:<hex>.
	Source string `json:"source"`
	// Digest is the sha256 of the release manifest's bytes as served,
	// which are also the digest asked for and the one the registry
	// gave.
	Digest string `json:"digest"`
	// Referrers says how the referrers were found (ReferrersAPI,
	// ReferrersFallback or ReferrersLayout).
	Referrers string `json:"referrers"`
	// Files are the release's files as served: name, the sha256 of the
	// bytes received, and their size. Empty when NotFetched says why.
	Files []File `json:"files"`
	// NotFetched says why the files were not fetched: no verified bundle
	// names the release manifest. Empty when they were.
	NotFetched string `json:"not_fetched,omitempty"`
	// Skipped are (the first 100 of) the referrers that are not Sigstore
	// bundles (an SBOM, a signature), by digest and artifactType; they
	// are not checked. SkippedCount counts them all.
	Skipped      []string `json:"skipped_referrers,omitempty"`
	SkippedCount int      `json:"skipped_referrers_count,omitempty"`
	// Report is the verification's report.
	Report *verify.Report `json:"report"`
	// FilesDir is where the files were written (WithFilesTo), empty when
	// nothing was.
	FilesDir string `json:"files_dir,omitempty"`
	// LayoutDir is where the OCI layout copy was written (WithLayoutTo),
	// empty when nothing was.
	LayoutDir string `json:"layout_dir,omitempty"`
	// Entries are the bundle referrers read, in digest order: a caller
	// tells a release whose bundles need another verification (a fleet
	// dispatch, attest/dispatch) by them.
	Entries []verify.Entry `json:"-"`
}

// Verify fetches the release ref names (a registry reference, or
// oci-layout:DIR[@sha256:<hex>], which reads nothing but DIR), and
// verifies it with v, in an order that bounds what a hostile registry
// can make it read:
//
//   - the manifest, whose sha256 must be the digest the reference pins
//     and the registry's Docker-Content-Digest (a layout's index.json
//     entry), and whose files must be within WithMaxLayerSize and
//     WithMaxTotalSize;
//   - the referrers, listed and checked as they stream in, a few at a
//     time: those whose listed artifactType or size cannot be a
//     Sigstore bundle's are dropped unread, and only the bundles are
//     kept (within v's limits);
//   - the bundles' signatures: unless one verified bundle of v's
//     predicate type names the manifest, no file is fetched, and the
//     Result's report fails and NotFetched says why;
//   - every file (layer), hashed as served (at most its size and one
//     byte more).
//
// Every file and the manifest are then the artifacts that must be
// subjects: a layer changed in the registry is a subject mismatch, a
// changed bundle a signature failure. With WithFilesTo or WithLayoutTo
// the files or an OCI layout copy are written only when the report says
// verified, each directory whole; otherwise nothing is left behind.
//
// An error means nothing could be verified (ref not found, a manifest
// that is not the digest asked for, not a gpuattest release, a file
// over the limits, a network failure or timeout, a bundle over v's
// limits) or the verified files could not be written; a failed
// verification is a Result whose Report says why.
func Verify(ctx context.Context, v *verify.Verifier, ref string, opts ...Option) (*Result, error) {
	return withRef(ctx, v, ref, opts, "verify", func(ctx context.Context, o *options) (*Result, error) {
		return verifyRef(ctx, v, ref, o)
	})
}

// withRef applies opts and runs do for ref (what names the call in an
// error) within the overall registry timeout, reporting a timeout as
// the TimeoutError naming what ref reads.
func withRef[T any](ctx context.Context, v *verify.Verifier, ref string, opts []Option, what string, do func(context.Context, *options) (T, error)) (T, error) {
	var zero T
	o, err := applyOptions(opts)
	if err != nil {
		return zero, err
	}
	if v == nil {
		return zero, errors.New(what + ": nil verifier")
	}
	ctx, cancel := o.withDeadline(ctx, timeoutSource(ref, o))
	defer cancel()
	res, err := do(ctx, o)
	return res, timedOut(ctx, err)
}

// readRef opens ref and reads the release into st (as fetch does): what
// was read, and the name of the source it came from.
func readRef(ctx context.Context, v *verify.Verifier, ref string, o *options, st *stage) (*fetched, string, error) {
	src, err := openSource(ctx, ref, o)
	if err != nil {
		return nil, "", err
	}
	defer src.close()
	f, err := fetch(ctx, src, v, st, o)
	if err != nil {
		return nil, "", err
	}
	return f, src.name(), nil
}

// timeoutSource names what ref reads, for the overall timeout's error.
func timeoutSource(ref string, o *options) string {
	if strings.HasPrefix(ref, LayoutPrefix) {
		return ref
	}
	if r, err := o.parseRef(ref); err == nil {
		return "registry " + r.Context().RegistryStr()
	}
	return ref
}

func verifyRef(ctx context.Context, v *verify.Verifier, ref string, o *options) (*Result, error) {
	var res *Result
	wrote, err := readStaged(ctx, v, ref, o, o.filesTo, o.layoutTo, func(f *fetched, name string) (bool, error) {
		res = &Result{Ref: ref, Source: name + "@" + f.id.String(), Digest: f.id.String(), Referrers: f.how,
			Files: f.files, NotFetched: f.notFetched, Skipped: f.skipped, SkippedCount: f.skippedCount, Entries: f.entries}
		if res.Files == nil {
			res.Files = []File{}
		}
		res.Report = v.Complete(ctx, f.checked, f.artifacts)
		if err := context.Cause(ctx); err != nil {
			var te *TimeoutError
			if errors.As(err, &te) {
				res = nil
				return false, te
			}
		}
		return res.Report.Verified, nil
	})
	if err != nil {
		return res, err
	}
	if wrote {
		res.FilesDir, res.LayoutDir = o.filesTo, o.layoutTo
	}
	return res, nil
}

// readStaged reads the release ref names, staging its files (into files)
// and a layout copy (into layout) where they are named, and calls check
// with what was read and the source's name: only when check returns true
// is anything written, each directory whole; otherwise the stage is
// removed. It reports whether it wrote; an error after check ran is the
// write's.
func readStaged(ctx context.Context, v *verify.Verifier, ref string, o *options, files, layout string, check func(*fetched, string) (bool, error)) (bool, error) {
	st, err := newStage(files, layout)
	if err != nil {
		return false, err
	}
	defer st.discard()
	f, name, err := readRef(ctx, v, ref, o, st)
	if err != nil {
		return false, err
	}
	ok, err := check(f, name)
	if err != nil || !ok || ctx.Err() != nil {
		return false, err
	}
	if err := st.commit(ctx, f.layoutIndex()); err != nil {
		return false, err
	}
	return true, nil
}

// fetched is a release as read from a source.
type fetched struct {
	raw          []byte
	id           v1.Hash
	manifest     v1.Manifest
	how          string
	files        []File
	notFetched   string
	entries      []verify.Entry
	checked      *verify.Checked
	artifacts    []verify.Artifact
	referrers    []v1.Descriptor
	skipped      []string
	skippedCount int
	tag          string
}

// fetch reads the release: its manifest, its bundles and, once a
// verified bundle names the manifest, its layers (into st when it stages
// anything).
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
	release := src.name() + "@" + id.String()
	if f.manifest, err = parseRelease(raw, release); err != nil {
		return nil, err
	}
	total, err := checkSizes(f.manifest.Layers, release, o)
	if err != nil {
		return nil, err
	}
	for _, b := range [][]byte{raw, emptyJSON} {
		if err := st.blob(b); err != nil {
			return nil, err
		}
	}
	if err := f.fetchBundles(ctx, src, v, st, max(o.jobs, 8), o.bundles); err != nil {
		return nil, err
	}
	manifest := verify.Artifact{Name: release, SHA256: id.Hex}
	if o.criteria != nil {
		claimed := []verify.Artifact{}
		for _, l := range f.manifest.Layers {
			claimed = append(claimed, verify.Artifact{Name: l.Annotations[AnnotationTitle], SHA256: l.Digest.Hex})
		}
		o.criteria(Criteria{Source: release, Bundles: len(f.entries), Criteria: v.Criteria(append(claimed, manifest)), Entries: f.entries})
	}
	f.checked = v.CheckBundles(ctx, f.entries)
	if !f.checked.Covers(manifest) {
		f.notFetched = fmt.Sprintf("no verified bundle of the predicate type names the release manifest %s, so its %d file(s), %d bytes, were not fetched", id, len(f.manifest.Layers), total)
		f.artifacts = []verify.Artifact{manifest}
		return f, nil
	}
	if f.files, err = fetchLayers(ctx, src, f.manifest.Layers, st, o.jobs); err != nil {
		return nil, err
	}
	for _, fl := range f.files {
		f.artifacts = append(f.artifacts, verify.Artifact{Name: fl.Name, SHA256: fl.SHA256})
	}
	f.artifacts = append(f.artifacts, manifest)
	return f, nil
}

// checkSizes holds the files the manifest names to the limits, before
// any is fetched, and returns their total size.
func checkSizes(layers []v1.Descriptor, release string, o *options) (int64, error) {
	var total int64
	for _, l := range layers {
		if l.Size > o.maxLayer {
			return 0, fmt.Errorf("%s: file %s is %d bytes, more than the %d a file may be\nhint: nothing was fetched; raise the limit with --max-layer-size", release, textsafe.Line(l.Annotations[AnnotationTitle]), l.Size, o.maxLayer)
		}
		if total += l.Size; total > o.maxTotal {
			return 0, fmt.Errorf("%s: the release's files add up to more than %d bytes\nhint: nothing was fetched; raise the limit with --max-total-size", release, o.maxTotal)
		}
	}
	return total, nil
}

// parseRelease decodes a release manifest and checks its layers' titles.
func parseRelease(raw []byte, source string) (v1.Manifest, error) {
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("%s: not an image manifest: %w", source, err)
	}
	if m.ArtifactType != ReleaseArtifactType {
		return m, fmt.Errorf("%s is not a gpuattest release: artifactType %q, expected %s\nhint: gpuattest push publishes releases", source, textsafe.Line(m.ArtifactType), ReleaseArtifactType)
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
	// hinted is set when the bundle was read by the layer the listing
	// names, without the manifest.
	hinted bool
}

// bundleReader reads a release's referrers as they are listed: each is
// dropped unread when its listing shows it cannot be a bundle, else
// fetched (jobs at once), checked, and either dropped or kept as a
// bundle. Only bundles are held, within v's limits.
type bundleReader struct {
	f      *fetched
	src    source
	v      *verify.Verifier
	mu     sync.Mutex
	refs   []*bundleRef
	total  int64
	listed int
	seen   map[v1.Hash]bool
	// hints says whether a referrer's bundle may be read by the layer
	// its listing names (not when a layout copy needs its manifest).
	hints bool
	// cache, when not nil, keeps the bundles read.
	cache *BundleCache
}

// fetchBundles reads the bundle referrers and lists them in digest
// order. A referrer whose manifest or bundle does not match its digest,
// or that is not one Sigstore bundle about this release, becomes an
// entry that fails the signature check; other referrers are skipped.
func (f *fetched) fetchBundles(ctx context.Context, src source, v *verify.Verifier, st *stage, jobs int, cache *BundleCache) error {
	br := &bundleReader{f: f, src: src, v: v, seen: map[v1.Hash]bool{}, hints: st.layoutTmp == "", cache: cache}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	how, err := src.referrers(gctx, f.id, func(d v1.Descriptor) error {
		if br.listed++; br.listed > maxReferrers {
			return fmt.Errorf("%s lists more than %d referrers of the release, the most one verification reads", src.name(), maxReferrers)
		}
		if br.seen[d.Digest] {
			return nil
		}
		br.seen[d.Digest] = true
		if why := unfit(d); why != "" {
			br.skip(d, why)
			return nil
		}
		g.Go(func() error { return br.read(gctx, d) })
		return gctx.Err()
	})
	if werr := g.Wait(); werr != nil && (err == nil || errors.Is(err, context.Canceled)) {
		err = werr
	}
	if err == nil {
		err = br.unshare(ctx)
	}
	if err != nil {
		return fmt.Errorf("reading the referrers of %s@%s: %w", src.name(), f.id, err)
	}
	f.how = how
	sort.Slice(br.refs, func(i, j int) bool { return br.refs[i].desc.Digest.String() < br.refs[j].desc.Digest.String() })
	for _, r := range br.refs {
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

// unfit says why a listed referrer cannot be a bundle referrer, from its
// listing alone, or "". A registry may list the config's media type as
// the artifactType (go-containerregistry's does: the empty config's), so
// that one, and none, are read to see.
func unfit(d v1.Descriptor) string {
	at := d.ArtifactType
	switch {
	case d.MediaType != "" && d.MediaType != types.OCIManifestSchema1:
		return "media type " + string(d.MediaType)
	case at != "" && at != EmptyConfigMediaType && !strings.HasPrefix(at, bundleMediaTypePrefix):
		return at
	case d.Size > maxReferrerManifest:
		return fmt.Sprintf("%s, a manifest of %d bytes", at, d.Size)
	}
	return ""
}

// skip records a referrer that is not a bundle.
func (b *bundleReader) skip(d v1.Descriptor, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.f.skippedCount++
	if len(b.f.skipped) < maxSkippedListed {
		b.f.skipped = append(b.f.skipped, d.Digest.String()+" ("+textsafe.Line(why)+")")
	}
}

// read fetches referrer d's bundle by the layer its listing names
// (hinted), else its manifest and, when it is a bundle referrer, its
// bundle.
func (b *bundleReader) read(ctx context.Context, d v1.Descriptor) error {
	if r := b.hinted(ctx, d); r != nil {
		return b.keep(r, r.layer.Size)
	}
	return b.readManifest(ctx, d)
}

// readManifest fetches referrer d's manifest and, when it is a bundle
// referrer, its bundle.
func (b *bundleReader) readManifest(ctx context.Context, d v1.Descriptor) error {
	limit := int64(maxReferrerManifest)
	if d.Size > 0 {
		limit = d.Size
	}
	raw, err := b.src.manifest(ctx, d.Digest, limit)
	if err != nil {
		return fmt.Errorf("reading referrer %s@%s: %w", b.src.name(), d.Digest, err)
	}
	if !isBundleReferrer(d, raw) {
		b.skip(d, d.ArtifactType)
		return nil
	}
	r := &bundleRef{desc: d, raw: raw}
	r.layer, r.problem = b.f.bundleLayer(r.raw, &r.desc)
	if r.problem != "" {
		r.raw = nil
		return b.keep(r, 0)
	}
	if r.layer.Size > b.v.MaxBundleSize() {
		return fmt.Errorf("referrer %s@%s: its bundle is %d bytes, more than the %d a bundle may be\nhint: the limit follows --max-predicate-size", b.src.name(), d.Digest, r.layer.Size, b.v.MaxBundleSize())
	}
	if err := b.keep(r, r.layer.Size); err != nil {
		return err
	}
	if r.data, r.problem, err = readBundle(ctx, b.src, r.layer, b.cache); err != nil {
		return fmt.Errorf("reading the bundle of referrer %s@%s: %w", b.src.name(), d.Digest, err)
	}
	return nil
}

// hinted reads the bundle of referrer d by the layer digest and size
// its listing's annotations name (AnnotationBundleDigest,
// AnnotationBundleSize), without its manifest, and returns it when the
// bytes served are that digest and the statement they hold names the
// release. Otherwise it returns nil and the referrer is read through its
// manifest as any other: a hint that lies costs a request, never a
// bundle. The bundle is then verified as any other; a layout copy, which
// holds the referrer manifests, reads them all.
func (b *bundleReader) hinted(ctx context.Context, d v1.Descriptor) *bundleRef {
	// A registry may list the config's media type as the artifactType
	// (go-containerregistry's does), as unfit allows.
	if !b.hints || !strings.HasPrefix(d.ArtifactType, bundleMediaTypePrefix) && d.ArtifactType != EmptyConfigMediaType {
		return nil
	}
	h, err := v1.NewHash(d.Annotations[AnnotationBundleDigest])
	size, serr := strconv.ParseInt(d.Annotations[AnnotationBundleSize], 10, 64)
	if err != nil || serr != nil || h.Algorithm != "sha256" || size < 0 || size > b.v.MaxBundleSize() {
		return nil
	}
	layer := v1.Descriptor{MediaType: BundleMediaType, Digest: h, Size: size}
	data, problem, err := readBundle(ctx, b.src, layer, b.cache)
	if err != nil || problem != "" || !statementNames(data, b.f.id) {
		return nil
	}
	return &bundleRef{desc: d, layer: layer, data: data, hinted: true}
}

// unshare reads again, through its manifest, each referrer read by its
// hint whose bundle layer another referrer also names: a hint that
// names another referrer's bundle must not stand in for its own.
func (b *bundleReader) unshare(ctx context.Context) error {
	layers := map[v1.Hash]int{}
	for _, r := range b.refs {
		if r.problem == "" {
			layers[r.layer.Digest]++
		}
	}
	var again []*bundleRef
	b.refs = slices.DeleteFunc(b.refs, func(r *bundleRef) bool {
		if r.hinted && layers[r.layer.Digest] > 1 {
			again = append(again, r)
			b.total -= r.layer.Size
			return true
		}
		return false
	})
	return forEach(ctx, 8, len(again), func(ctx context.Context, i int) error { return b.readManifest(ctx, again[i].desc) })
}

// statementNames reports whether the in-toto statement a bundle's DSSE
// envelope carries names the release manifest id as a subject. It reads
// the payload unverified, only to choose how the referrer is read.
func statementNames(bundle []byte, id v1.Hash) bool {
	var b struct {
		DSSE struct {
			Payload []byte `json:"payload"`
		} `json:"dsseEnvelope"`
	}
	var st struct {
		Subject []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	if json.Unmarshal(bundle, &b) != nil || json.Unmarshal(b.DSSE.Payload, &st) != nil {
		return false
	}
	for _, s := range st.Subject {
		if s.Name == ManifestSubjectName && s.Digest[id.Algorithm] == id.Hex {
			return true
		}
	}
	return false
}

// keep holds r as a bundle, with size bytes to read, within the limits
// of one verification.
func (b *bundleReader) keep(r *bundleRef, size int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.refs) == verify.MaxBundles {
		return fmt.Errorf("%s has more than %d bundle referrers, the most one verification reads", b.src.name(), verify.MaxBundles)
	}
	if b.total += size; b.total > b.v.MaxBundlesSize() {
		return fmt.Errorf("the bundles of %s add up to more than %d bytes, the most one verification reads\nhint: the limit follows --max-predicate-size", b.src.name(), b.v.MaxBundlesSize())
	}
	b.refs = append(b.refs, r)
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

// readBundle reads a bundle blob of at most its descriptor's size, from
// cache when it holds it, and says so when the bytes do not match the
// digest.
func readBundle(ctx context.Context, src source, layer v1.Descriptor, cache *BundleCache) ([]byte, string, error) {
	if data := cache.get(ctx, layer.Digest, layer.Size); data != nil {
		return data, "", nil
	}
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
	cache.put(layer.Digest, data)
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
