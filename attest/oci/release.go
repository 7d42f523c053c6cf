package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

// File is one released file.
type File struct {
	// Name is the file's title in the release: a clean, relative,
	// slash-separated path (the statements' subject name).
	Name string `json:"name"`
	// Path is where its bytes are on this machine.
	Path string `json:"-"`
	// SHA256 is the lowercase hex sha256 of its bytes.
	SHA256 string `json:"sha256"`
	// Size is its size in bytes.
	Size int64 `json:"size"`
}

// Release is the OCI artifact of a set of released files: its manifest
// is fixed by the files' names, digests and sizes alone.
type Release struct {
	files  []File
	raw    []byte
	digest v1.Hash
}

var hexSHA256 = lazyregexp.New(`^[0-9a-f]{64}$`)

// NewRelease builds the release of files: one layer per file, ordered by
// name, each with its title; the empty config; no annotation that
// changes from one build to the next. Names must be clean relative paths,
// unique, and no name may be a directory of another.
func NewRelease(files []File) (*Release, error) {
	if len(files) == 0 {
		return nil, errors.New("release: no files")
	}
	fs := append([]File(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	var errs []error
	for i, f := range fs {
		if err := CheckName(f.Name); err != nil {
			errs = append(errs, err)
		}
		if !hexSHA256.MatchString(f.SHA256) {
			errs = append(errs, fmt.Errorf("release file %q: sha256 %q: expected 64 lowercase hex digits", f.Name, f.SHA256))
		}
		if f.Size < 0 {
			errs = append(errs, fmt.Errorf("release file %q: size %d: expected 0 or more", f.Name, f.Size))
		}
		if i > 0 && fs[i-1].Name == f.Name {
			errs = append(errs, fmt.Errorf("release file %q: listed twice", f.Name))
		}
	}
	if err := checkNesting(names(fs)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: ReleaseArtifactType, Config: emptyConfig(), Layers: []v1.Descriptor{}}
	for _, f := range fs {
		m.Layers = append(m.Layers, v1.Descriptor{
			MediaType:   FileMediaType,
			Size:        f.Size,
			Digest:      v1.Hash{Algorithm: "sha256", Hex: f.SHA256},
			Annotations: map[string]string{AnnotationTitle: f.Name},
		})
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding release manifest: %w", err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return &Release{files: fs, raw: raw, digest: h}, nil
}

// Digest returns the manifest's digest, "sha256:<hex>".
func (r *Release) Digest() string { return r.digest.String() }

// Manifest returns the manifest's bytes.
func (r *Release) Manifest() []byte { return append([]byte(nil), r.raw...) }

// Files returns the files in manifest order.
func (r *Release) Files() []File { return append([]File(nil), r.files...) }

// emptyConfig is the descriptor of the empty config.
func emptyConfig() v1.Descriptor {
	h, n, _ := v1.SHA256(bytes.NewReader(emptyJSON))
	return v1.Descriptor{MediaType: EmptyConfigMediaType, Size: n, Digest: h}
}

// CheckName checks a release file name: a clean, relative,
// slash-separated path of printable characters, which pull can write
// under its output directory as it is.
func CheckName(name string) error {
	bad := func(why string) error { return fmt.Errorf("release file name %q: %s", name, why) }
	switch {
	case name == "" || name == "." || name == "..":
		return bad("not a file name")
	case len(name) > 1024:
		return bad("longer than 1024 bytes")
	case !utf8.ValidString(name) || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return bad("holds a control or non-printable character")
	case strings.Contains(name, "\\"):
		return bad("holds a backslash; expected a slash-separated path")
	case name == ManifestSubjectName:
		return bad("reserved: statements name the release manifest so")
	case path.IsAbs(name) || path.Clean(name) != name:
		return bad("expected a clean relative path (no leading /, no . or .. elements, no //)")
	case strings.HasPrefix(name, "../"):
		return bad("leaves the directory it is written to")
	}
	return nil
}

// checkNesting refuses a name that is a directory of another (a and
// a/b): both cannot be written.
func checkNesting(names []string) error {
	files := map[string]bool{}
	for _, n := range names {
		files[n] = true
	}
	for _, n := range names {
		for d := path.Dir(n); d != "." && d != "/"; d = path.Dir(d) {
			if files[d] {
				return fmt.Errorf("release file %q: %q is a file, so it cannot be a directory too", n, d)
			}
		}
	}
	return nil
}

func names(fs []File) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// image is a Release as go-containerregistry's v1.Image, whose layers
// read the files from disk.
func (r *Release) image() (v1.Image, error) { return partial.CompressedToImage(releaseCore{r}) }

type releaseCore struct{ r *Release }

func (c releaseCore) RawConfigFile() ([]byte, error)      { return emptyJSON, nil }
func (c releaseCore) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (c releaseCore) RawManifest() ([]byte, error)        { return c.r.raw, nil }

func (c releaseCore) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, f := range c.r.files {
		if f.SHA256 == h.Hex && h.Algorithm == "sha256" {
			return fileLayer{f}, nil
		}
	}
	if h == emptyConfig().Digest {
		return blobLayer{data: emptyJSON, mt: EmptyConfigMediaType}, nil
	}
	return nil, fmt.Errorf("release has no blob %s", h)
}

// fileLayer is a released file as a layer.
type fileLayer struct{ f File }

func (l fileLayer) Digest() (v1.Hash, error) {
	return v1.Hash{Algorithm: "sha256", Hex: l.f.SHA256}, nil
}
func (l fileLayer) Size() (int64, error)                { return l.f.Size, nil }
func (l fileLayer) MediaType() (types.MediaType, error) { return FileMediaType, nil }

// Compressed opens the file; reading it to the end fails, before the
// registry commits the blob, when its bytes are not the digest and size
// the release names.
func (l fileLayer) Compressed() (io.ReadCloser, error) {
	f, err := os.Open(l.f.Path)
	if err != nil {
		return nil, err
	}
	return &checkedFile{File: f, want: l.f, h: sha256.New()}, nil
}

// checkedFile hashes a released file as it is read.
type checkedFile struct {
	*os.File
	want File
	h    hash.Hash
	n    int64
}

func (c *checkedFile) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if err == io.EOF {
		if sum := hex.EncodeToString(c.h.Sum(nil)); sum != c.want.SHA256 || c.n != c.want.Size {
			return n, fmt.Errorf("%s (%s) changed: sha256 %s and %d bytes, not the %s and %d bytes the release names", c.want.Name, c.want.Path, sum, c.n, c.want.SHA256, c.want.Size)
		}
	}
	return n, err
}

// blobLayer is a small blob held in memory.
type blobLayer struct {
	data []byte
	mt   types.MediaType
}

func (l blobLayer) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(l.data))
	return h, err
}
func (l blobLayer) Size() (int64, error)                { return int64(len(l.data)), nil }
func (l blobLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
func (l blobLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.data)), nil
}

// rawManifest is manifest bytes to PUT.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// bundleManifest is the referrer manifest of a bundle whose blob is
// layer, for the release described by subject: cosign v3's layout, with
// no timestamp, so the same bundle always makes the same manifest.
func bundleManifest(subject v1.Descriptor, layer v1.Descriptor, predicateType string) ([]byte, error) {
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  BundleMediaType,
		Config:        emptyConfig(),
		Layers:        []v1.Descriptor{layer},
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: map[string]string{
			AnnotationBundleContent: BundleContentDSSE,
			AnnotationPredicateType: predicateType,
			AnnotationBundleDigest:  layer.Digest.String(),
			AnnotationBundleSize:    strconv.FormatInt(layer.Size, 10),
		},
	}
	return json.Marshal(m)
}
