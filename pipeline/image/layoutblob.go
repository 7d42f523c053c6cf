package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A layout's index.json lists what it offers, but its blobs are content
// addressed: a manifest no longer listed (because index.json was replaced)
// is still the same image as long as its blob is there. blobImage and
// blobIndex read such unlisted blobs, so a locked digest stays fetchable.

// manifestLister is the part of an index fromIndex needs.
type manifestLister interface {
	IndexManifest() (*v1.IndexManifest, error)
	Image(v1.Hash) (v1.Image, error)
}

// unlistedBlob reads the manifest or index blob h from lp, verified. It
// returns the image, or the index, whichever the blob is.
func unlistedBlob(lp layout.Path, h v1.Hash) (v1.Image, manifestLister, error) {
	raw, err := lp.Bytes(h)
	if err != nil {
		return nil, nil, err
	}
	got, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, err
	}
	if got != h {
		return nil, nil, fmt.Errorf("blob %s in %s is corrupt: its bytes hash to %s", h, lp, got)
	}
	var probe struct {
		MediaType types.MediaType   `json:"mediaType"`
		Manifests []json.RawMessage `json:"manifests"`
		Config    json.RawMessage   `json:"config"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, nil, fmt.Errorf("blob %s is not a manifest or an index: %w", h, err)
	}
	switch {
	case probe.MediaType.IsIndex() || (probe.MediaType == "" && probe.Manifests != nil):
		im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return nil, nil, fmt.Errorf("parsing index %s: %w", h, err)
		}
		return nil, &blobIndex{lp: lp, m: im}, nil
	case probe.MediaType.IsImage() || (probe.MediaType == "" && probe.Config != nil):
		img, err := blobImageOf(lp, raw)
		return img, nil, err
	default:
		return nil, nil, fmt.Errorf("blob %s has media type %q, not an image or an index", h, probe.MediaType)
	}
}

func blobImageOf(lp layout.Path, raw []byte) (v1.Image, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing manifest: %w", err)
	}
	return partial.CompressedToImage(&blobImage{lp: lp, raw: raw, m: m})
}

type blobIndex struct {
	lp layout.Path
	m  *v1.IndexManifest
}

func (b *blobIndex) IndexManifest() (*v1.IndexManifest, error) { return b.m, nil }

func (b *blobIndex) Image(h v1.Hash) (v1.Image, error) {
	raw, err := b.lp.Bytes(h)
	if err != nil {
		return nil, err
	}
	if got, _, err := v1.SHA256(bytes.NewReader(raw)); err != nil || got != h {
		return nil, fmt.Errorf("blob %s in %s is corrupt", h, b.lp)
	}
	return blobImageOf(b.lp, raw)
}

type blobImage struct {
	lp  layout.Path
	raw []byte
	m   *v1.Manifest
}

func (b *blobImage) RawConfigFile() ([]byte, error) { return b.lp.Bytes(b.m.Config.Digest) }

func (b *blobImage) MediaType() (types.MediaType, error) {
	if b.m.MediaType != "" {
		return b.m.MediaType, nil
	}
	return types.OCIManifestSchema1, nil
}

func (b *blobImage) RawManifest() ([]byte, error) { return b.raw, nil }

func (b *blobImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h == b.m.Config.Digest {
		return &blobLayer{lp: b.lp, d: b.m.Config}, nil
	}
	for _, d := range b.m.Layers {
		if d.Digest == h {
			return &blobLayer{lp: b.lp, d: d}, nil
		}
	}
	return nil, fmt.Errorf("manifest has no layer %s", h)
}

type blobLayer struct {
	lp layout.Path
	d  v1.Descriptor
}

func (l *blobLayer) Digest() (v1.Hash, error)            { return l.d.Digest, nil }
func (l *blobLayer) Compressed() (io.ReadCloser, error)  { return l.lp.Blob(l.d.Digest) }
func (l *blobLayer) Size() (int64, error)                { return l.d.Size, nil }
func (l *blobLayer) MediaType() (types.MediaType, error) { return l.d.MediaType, nil }
