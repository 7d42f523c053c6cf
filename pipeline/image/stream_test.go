package image

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
)

// storedLayer is a layer whose stored bytes are given, with the media type
// given (go-containerregistry works out both digests).
func storedLayer(t *testing.T, stored []byte, mt types.MediaType) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(stored)), nil }, tarball.WithMediaType(mt))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestExtractLayerFormats(t *testing.T) {
	t.Parallel()
	plain := tarBytes(t, dir("d/"), file("d/f", strings.Repeat("z", 3<<20)), symlink("d/l", "f"))
	var zst bytes.Buffer
	zw, err := zstd.NewWriter(&zst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{".": "d 0755", "d": "d 0755", "d/f": "f 0644 " + strings.Repeat("z", 3<<20), "d/l": "l f"}
	for _, tc := range []struct {
		name  string
		layer v1.Layer
	}{
		{"gzip", layerOf(t, dir("d/"), file("d/f", strings.Repeat("z", 3<<20)), symlink("d/l", "f"))},
		{"zstd", storedLayer(t, zst.Bytes(), types.OCILayerZStd)},
		{"uncompressed media type", storedLayer(t, plain, types.OCIUncompressedLayer)},
		// A media type that says gzip over a plain tar: the magic number decides.
		{"plain tar under a gzip media type", plainStored{storedLayer(t, plain, types.OCILayer), plain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, err := Extract(t.Context(), imageOf(t, tc.layer), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, tree(t, root)); diff != "" {
				t.Errorf("extracted tree (-want +got):\n%s", diff)
			}
		})
	}
}

// plainStored is a layer stored as a plain tar whose media type says gzip.
type plainStored struct {
	v1.Layer
	b []byte
}

func (l plainStored) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.b)), nil
}

func TestExtractDockerArchiveReadsUncompressed(t *testing.T) {
	t.Parallel()
	l := layerOf(t, file("f", "from the archive"))
	img := archiveImage{imageOf(t, noCompressed{l})}
	root, err := Extract(t.Context(), img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{".": "d 0755", "f": "f 0644 from the archive"}, tree(t, root)); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
}

// noCompressed fails Compressed: a docker archive's uncompressed layer
// would be compressed on the fly to serve it.
type noCompressed struct{ v1.Layer }

func (noCompressed) Compressed() (io.ReadCloser, error) {
	return nil, errors.New("Compressed called on a docker archive layer")
}

// sha512Layer names its content with a digest Extract cannot check.
type sha512Layer struct{ v1.Layer }

func (sha512Layer) DiffID() (v1.Hash, error) {
	return v1.Hash{Algorithm: "sha512", Hex: strings.Repeat("ab", 64)}, nil
}

func TestExtractRefusesUncheckableLayerDigest(t *testing.T) {
	t.Parallel()
	img := imageOf(t, sha512Layer{layerOf(t, file("f", "x"))})
	_, err := Extract(t.Context(), img, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "want a sha256 digest") {
		t.Fatalf("Extract err = %v, want a refusal of the sha512 layer digest", err)
	}
}

func TestLayerStream(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789abcdef"), (3*streamBufSize+100)/16)
	t.Run("reads and hashes everything", func(t *testing.T) {
		t.Parallel()
		s := newLayerStream(bytes.NewReader(body))
		defer s.Close(func() error { return nil })
		got, err := io.ReadAll(io.LimitReader(s, int64(len(body))-7))
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, body[:len(body)-7]) || d != mustHash(t, body).String() {
			t.Errorf("read %d bytes, digest %s; want %d bytes, %s", len(got), d, len(body)-7, mustHash(t, body))
		}
	})
	t.Run("a read error reaches the reader", func(t *testing.T) {
		t.Parallel()
		s := newLayerStream(io.MultiReader(bytes.NewReader(body), errReader{}))
		defer s.Close(func() error { return nil })
		if _, err := io.ReadAll(s); err == nil || !strings.Contains(err.Error(), "connection reset (simulated)") {
			t.Errorf("ReadAll err = %v, want the simulated read failure", err)
		}
	})
	t.Run("close mid-stream stops the goroutine", func(t *testing.T) {
		t.Parallel()
		pr, pw := io.Pipe()
		s := newLayerStream(pr)
		go pw.Write(body) // blocks once the read-ahead is full
		if _, err := io.ReadFull(s, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(func() error { return pr.CloseWithError(errors.New("closed")) }); err != nil {
			t.Fatal(err)
		}
	})
}

func mustHash(t *testing.T, b []byte) v1.Hash {
	t.Helper()
	h, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// swappedLayers is an image whose Layers are replaced.
type swappedLayers struct {
	v1.Image
	layers []v1.Layer
}

func (s swappedLayers) Layers() ([]v1.Layer, error) { return s.layers, nil }

// noDiffID fails DiffID: go-containerregistry answers it for an OCI layout
// layer by decompressing the whole layer, a second pass Extract must not
// make; the config lists the digest.
type noDiffID struct{ v1.Layer }

func (noDiffID) DiffID() (v1.Hash, error) {
	return v1.Hash{}, errors.New("DiffID called: the layer would be decompressed twice")
}

func TestExtractTakesLayerDigestsFromConfig(t *testing.T) {
	t.Parallel()
	l := layerOf(t, file("f", "x"))
	img := imageOf(t, l)
	root, err := Extract(t.Context(), swappedLayers{img, []v1.Layer{noDiffID{l}}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{".": "d 0755", "f": "f 0644 x"}, tree(t, root)); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
	_, err = Extract(t.Context(), swappedLayers{img, []v1.Layer{l, l}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "the image has 2 layers but its config lists 1 layer digests") {
		t.Errorf("Extract of more layers than the config lists: err = %v, want a count mismatch", err)
	}
}

// TestExtractRecreatedDirectory: entries after a whiteout of their
// directory land in the new directory, not in the removed one that a cached
// directory handle would still point at.
func TestExtractRecreatedDirectory(t *testing.T) {
	t.Parallel()
	img := imageOf(t,
		layerOf(t, dir("d/"), dir("d/e/"), file("d/e/a", "1"), file("d/x", "2")),
		layerOf(t, file(".wh.d", ""), dir("d/"), dir("d/e/"), file("d/e/b", "3"), file("d/y", "4")),
		layerOf(t, file("d/e/.wh.b", ""), file("d/e/c", "5"), symlink("d/y", "e/c")),
	)
	root, err := Extract(t.Context(), img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{".": "d 0755", "d": "d 0755", "d/e": "d 0755", "d/e/c": "f 0644 5", "d/y": "l e/c"}
	if diff := cmp.Diff(want, tree(t, root)); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
}
