package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Bundle is a Sigstore bundle to publish with a release.
type Bundle struct {
	// Data is the bundle's JSON.
	Data []byte
	// PredicateType is the predicate type of the statement it signs.
	PredicateType string
}

// PushResult says what Push published.
type PushResult struct {
	// Ref is the release by digest: REPOSITORY@sha256:<hex>.
	Ref string `json:"ref"`
	// Tag is the tag pushed, empty when the reference was a digest.
	Tag string `json:"tag,omitempty"`
	// Digest is the release manifest's digest.
	Digest string `json:"digest"`
	// Files is the number of released files (layers).
	Files int `json:"files"`
	// Bundles is the number of bundles published as referrers.
	Bundles int `json:"bundles"`
	// Written is the number of bundle referrers this push wrote; 0 when
	// every one was there already.
	Written int `json:"bundles_written"`
	// Referrers says how the registry keeps referrers: ReferrersAPI or
	// ReferrersFallback.
	Referrers string `json:"referrers"`
}

// Push publishes rel to ref (REGISTRY/REPOSITORY[:TAG|@sha256:<hex>]):
// the files' blobs (at most WithJobs at once; a blob the registry has is
// not sent again), the empty config and the manifest, then each bundle
// as a referrer of the manifest that the registry does not list yet.
// A push that was killed is completed by pushing again; pushing again
// what is there writes nothing.
func Push(ctx context.Context, ref string, rel *Release, bundles []Bundle, opts ...Option) (*PushResult, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	if rel == nil {
		return nil, errors.New("push: nil release")
	}
	r, err := o.parseRef(ref)
	if err != nil {
		return nil, err
	}
	ctx, cancel := o.withDeadline(ctx, "registry "+r.Context().RegistryStr())
	defer cancel()
	res, err := push(ctx, r, ref, rel, bundles, o)
	return res, timedOut(ctx, err)
}

func push(ctx context.Context, r name.Reference, ref string, rel *Release, bundles []Bundle, o *options) (*PushResult, error) {
	if d, ok := r.(name.Digest); ok && d.DigestStr() != rel.Digest() {
		return nil, fmt.Errorf("reference %s names digest %s, but the release is %s", ref, d.DigestStr(), rel.Digest())
	}
	p, err := remote.NewPusher(append(o.remoteOptions(), remote.WithContext(ctx))...)
	if err != nil {
		return nil, err
	}
	img, err := rel.image()
	if err != nil {
		return nil, err
	}
	o.logger.DebugContext(ctx, "pushing release", "ref", r.String(), "digest", rel.Digest(), "files", len(rel.files))
	if err := p.Push(ctx, r, img); err != nil {
		return nil, fmt.Errorf("pushing the release to %s: %w", r, err)
	}
	res := &PushResult{Ref: r.Context().Digest(rel.Digest()).String(), Digest: rel.Digest(), Files: len(rel.files), Bundles: len(bundles)}
	if t, ok := r.(name.Tag); ok {
		res.Tag = t.TagStr()
	}
	if res.Written, res.Referrers, err = pushBundles(ctx, p, r.Context(), rel, bundles, o); err != nil {
		return nil, err
	}
	return res, nil
}

// pushBundles writes each bundle referrer of rel that the registry does
// not list, one after the other (the tag schema's index is read, changed
// and written back for each), and returns how many it wrote.
func pushBundles(ctx context.Context, p *remote.Pusher, repo name.Repository, rel *Release, bundles []Bundle, o *options) (int, string, error) {
	src, err := openRegistry(ctx, repo.Digest(rel.Digest()).String(), o)
	if err != nil {
		return 0, "", err
	}
	listed := map[v1.Hash]bool{}
	how, err := src.referrers(ctx, rel.digest, func(d v1.Descriptor) error {
		if len(listed) == maxReferrers {
			return fmt.Errorf("more than %d referrers", maxReferrers)
		}
		listed[d.Digest] = true
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("listing the referrers of %s: %w", rel.Digest(), err)
	}
	subject := v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: rel.digest, Size: int64(len(rel.raw))}
	written := 0
	for i, b := range bundles {
		if b.PredicateType == "" {
			return written, how, fmt.Errorf("bundle %d: no predicate type", i+1)
		}
		blob := blobLayer{data: b.Data, mt: BundleMediaType}
		h, err := blob.Digest()
		if err != nil {
			return written, how, err
		}
		raw, err := bundleManifest(subject, v1.Descriptor{MediaType: BundleMediaType, Digest: h, Size: int64(len(b.Data))}, b.PredicateType)
		if err != nil {
			return written, how, err
		}
		md, _, err := v1.SHA256(bytes.NewReader(raw))
		if err != nil {
			return written, how, err
		}
		if listed[md] {
			continue
		}
		for _, l := range []blobLayer{blob, {data: emptyJSON, mt: EmptyConfigMediaType}} {
			layer, err := partial.CompressedToLayer(l)
			if err == nil {
				err = p.Upload(ctx, repo, layer)
			}
			if err != nil {
				return written, how, fmt.Errorf("uploading bundle %d: %w", i+1, err)
			}
		}
		if err := p.Put(ctx, repo.Digest(md.String()), rawManifest{raw: raw, mt: types.OCIManifestSchema1}); err != nil {
			return written, how, fmt.Errorf("pushing the referrer of bundle %d (%s): %w", i+1, b.PredicateType, err)
		}
		listed[md] = true
		written++
	}
	return written, how, nil
}
