package oci

import (
	"context"
	"fmt"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// PullFiles writes files of the release ref names under dir (which must
// not exist or be empty, and appears whole or not at all): every file,
// or only those named in names. No bundle is read or verified: each file
// is checked against the digest and size the manifest gives, within the
// size bounds, and the caller checks the files against what it trusts
// (a fleet node, against the digests of the signed dispatch). It is for
// a release whose digest the caller holds from a signed statement, or
// whose files it verifies itself.
func PullFiles(ctx context.Context, ref, dir string, names []string, opts ...Option) (*Fetched, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := o.withDeadline(ctx, timeoutSource(ref, o))
	defer cancel()
	f, err := pullFiles(ctx, ref, dir, names, o)
	return f, timedOut(ctx, err)
}

func pullFiles(ctx context.Context, ref, dir string, names []string, o *options) (*Fetched, error) {
	src, err := openSource(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	defer src.close()
	raw, id, err := src.resolve(ctx)
	if err != nil {
		return nil, err
	}
	release := src.name() + "@" + id.String()
	m, err := parseRelease(raw, release)
	if err != nil {
		return nil, err
	}
	layers := m.Layers
	if names != nil {
		layers = nil
		for _, l := range m.Layers {
			if slices.Contains(names, l.Annotations[AnnotationTitle]) {
				layers = append(layers, l)
			}
		}
		if len(layers) != len(names) {
			return nil, fmt.Errorf("%s: %d of the %d files asked for are in the release", release, len(layers), len(names))
		}
	}
	if _, err := checkSizes(layers, release, o); err != nil {
		return nil, err
	}
	st, err := newStage(dir, "")
	if err != nil {
		return nil, err
	}
	defer st.discard()
	files, err := fetchLayers(ctx, src, layers, st, o.jobs)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		if want := layers[i].Digest; f.SHA256 != want.Hex || f.Size != layers[i].Size {
			return nil, fmt.Errorf("%s: file %s: the registry served %d bytes of sha256 %s, the manifest names %d bytes of %s", release, f.Name, f.Size, f.SHA256, layers[i].Size, want)
		}
	}
	if err := st.commit(ctx, []v1.Descriptor{}); err != nil {
		return nil, err
	}
	return &Fetched{Source: release, Digest: id.String(), Files: files}, nil
}
