package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/gpuattest/gpuattest/internal/textsafe"
)

// LayoutPrefix starts a reference to an OCI image layout directory:
// oci-layout:DIR or oci-layout:DIR@sha256:<hex>.
const LayoutPrefix = "oci-layout:"

// Bounds of what is read before anything is verified.
const (
	// maxManifest is the largest manifest or index read (the
	// distribution spec's recommended limit).
	maxManifest = 4 << 20
	// maxReferrersPage is the largest page of the referrers API read;
	// it is decoded as it arrives, not held.
	maxReferrersPage = 64 << 20
	// maxReferrersPages is the most pages of the referrers API followed.
	maxReferrersPages = 1000
)

// source is where a release is read from: a registry repository or an
// OCI image layout.
type source interface {
	// name is the source as shown: REPOSITORY or oci-layout:DIR.
	name() string
	// resolve returns the release manifest's bytes as served and their
	// sha256, which it checked against the digest asked for and the one
	// the registry or index.json gives.
	resolve(ctx context.Context) ([]byte, v1.Hash, error)
	// manifest reads the manifest with digest h, unverified: at most
	// limit bytes, and one more when there are more.
	manifest(ctx context.Context, h v1.Hash, limit int64) ([]byte, error)
	// referrers calls fn with each manifest that names h as its subject,
	// in turn, as it reads the list, and says how they were found. An
	// error from fn stops it.
	referrers(ctx context.Context, h v1.Hash, fn func(v1.Descriptor) error) (string, error)
	// blob opens blob h, unverified.
	blob(ctx context.Context, h v1.Hash) (io.ReadCloser, error)
	// close releases what the source holds open.
	close()
}

// Ways referrers are found, as Result.Referrers says.
const (
	ReferrersAPI      = "referrers API"
	ReferrersFallback = "referrers tag schema (sha256-<hex> index)"
	ReferrersLayout   = "OCI layout index"
)

// openSource opens ref: oci-layout:DIR[@sha256:<hex>] or a registry
// reference.
func openSource(ctx context.Context, ref string, o *options) (source, error) {
	if spec, ok := strings.CutPrefix(ref, LayoutPrefix); ok {
		return openLayout(spec)
	}
	return openRegistry(ctx, ref, o)
}

// readLimited reads r whole, refusing more than limit bytes.
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := readUpTo(r, limit)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s larger than %d bytes", what, limit)
	}
	return b, nil
}

// readUpTo reads r whole, or its first limit+1 bytes when it holds more.
func readUpTo(r io.Reader, limit int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, limit+1))
}

// parseIndex decodes an image index.
func parseIndex(b []byte) ([]v1.Descriptor, error) {
	var idx v1.IndexManifest
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("decoding image index: %w", err)
	}
	return idx.Manifests, nil
}

// eachDescriptor decodes an image index from r as it is read, calling fn
// with each entry of its manifests list in turn: a list of any length
// is never held whole.
func eachDescriptor(r io.Reader, fn func(v1.Descriptor) error) error {
	dec := json.NewDecoder(r)
	if err := wantDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decoding image index: %w", err)
		}
		if key != "manifests" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("decoding image index: %w", err)
			}
			continue
		}
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decoding image index: %w", err)
		}
		if t == nil {
			continue
		}
		if t != json.Delim('[') {
			return fmt.Errorf("decoding image index: manifests is %v, expected a list", t)
		}
		for dec.More() {
			var d v1.Descriptor
			if err := dec.Decode(&d); err != nil {
				return fmt.Errorf("decoding image index: %w", err)
			}
			if err := fn(d); err != nil {
				return err
			}
		}
		if err := wantDelim(dec, ']'); err != nil {
			return err
		}
	}
	return wantDelim(dec, '}')
}

func wantDelim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decoding image index: %w", err)
	}
	if t != d {
		return fmt.Errorf("decoding image index: %v, expected %v", t, d)
	}
	return nil
}

// capReader fails a read past its limit, naming what it reads.
type capReader struct {
	r     io.Reader
	left  int64
	limit int64
	what  string
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%s larger than %d bytes", c.what, c.limit)
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// digestAs hashes raw with the algorithm of digest (sha256 or sha512)
// and returns ALGORITHM:<hex>.
func digestAs(raw []byte, digest string) (string, error) {
	var sum []byte
	switch alg, _, _ := strings.Cut(digest, ":"); alg {
	case "sha256":
		s := sha256.Sum256(raw)
		sum = s[:]
	case "sha512":
		s := sha512.Sum512(raw)
		sum = s[:]
	default:
		return "", fmt.Errorf("digest %q: expected sha256:<hex> or sha512:<hex>", textsafe.Line(digest))
	}
	alg, _, _ := strings.Cut(digest, ":")
	return alg + ":" + hex.EncodeToString(sum), nil
}

// registrySource reads a repository over the distribution API.
type registrySource struct {
	ref    name.Reference
	repo   name.Repository
	client *http.Client
}

func openRegistry(ctx context.Context, ref string, o *options) (*registrySource, error) {
	r, err := o.parseRef(ref)
	if err != nil {
		return nil, err
	}
	auth, err := o.keychain.Resolve(r.Context())
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", r.Context().RegistryStr(), err)
	}
	t, err := transport.NewWithContext(ctx, r.Context().Registry, auth, o.transport(), []string{r.Context().Scope(transport.PullScope)})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", r.Context().RegistryStr(), err)
	}
	return &registrySource{ref: r, repo: r.Context(), client: &http.Client{Transport: t}}, nil
}

func (s *registrySource) name() string { return s.repo.String() }

func (s *registrySource) close() {}

// get GETs /v2/<repo>/<kind>/<id>.
func (s *registrySource) get(ctx context.Context, kind, id string, accept ...string) (*http.Response, error) {
	return s.getPath(ctx, fmt.Sprintf("/v2/%s/%s/%s", s.repo.RepositoryStr(), kind, id), accept...)
}

// getPath GETs a path (with its query) of the registry.
func (s *registrySource) getPath(ctx context.Context, pathQuery string, accept ...string) (*http.Response, error) {
	u, err := url.Parse(pathQuery)
	if err != nil {
		return nil, err
	}
	u.Scheme, u.Host = s.repo.Scheme(), s.repo.RegistryStr()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if len(accept) > 0 {
		req.Header.Set("Accept", strings.Join(accept, ","))
	}
	return s.client.Do(req)
}

var manifestTypes = []string{string(types.OCIManifestSchema1), string(types.OCIImageIndex), string(types.DockerManifestSchema2), string(types.DockerManifestList)}

// getManifest reads the manifest id names, with the response's header.
func (s *registrySource) getManifest(ctx context.Context, id string) ([]byte, http.Header, error) {
	resp, err := s.get(ctx, "manifests", id, manifestTypes...)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, nil, err
	}
	b, err := readLimited(resp.Body, maxManifest, "manifest")
	return b, resp.Header, err
}

// getManifestUpTo reads the manifest id names, at most limit bytes and
// one more when there are more.
func (s *registrySource) getManifestUpTo(ctx context.Context, id string, limit int64) ([]byte, error) {
	resp, err := s.get(ctx, "manifests", id, manifestTypes...)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, err
	}
	return readUpTo(resp.Body, limit)
}

// resolve fetches the manifest the reference names and hashes it: the
// hash must be the digest the reference pins, and the registry's
// Docker-Content-Digest where it sends one.
func (s *registrySource) resolve(ctx context.Context) ([]byte, v1.Hash, error) {
	raw, hdr, err := s.getManifest(ctx, s.ref.Identifier())
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("fetching %s: %w", s.ref, err)
	}
	got, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if d, ok := s.ref.(name.Digest); ok && d.DigestStr() != got.String() {
		return nil, v1.Hash{}, fmt.Errorf("fetching %s: the registry served a manifest whose digest is %s, not %s, the digest asked for\nhint: the registry (or something on the way) serves other bytes under that digest; nothing it served was used", s.ref, got, d.DigestStr())
	}
	if hd := hdr.Get("Docker-Content-Digest"); hd != "" {
		served, err := digestAs(raw, hd)
		if err != nil {
			return nil, v1.Hash{}, fmt.Errorf("fetching %s: Docker-Content-Digest: %w", s.ref, err)
		}
		if served != hd {
			return nil, v1.Hash{}, fmt.Errorf("fetching %s: the registry's Docker-Content-Digest is %s, but the manifest it served has digest %s\nhint: the registry (or something on the way) serves other bytes than it says; nothing it served was used", s.ref, textsafe.Line(hd), served)
		}
	}
	return raw, got, nil
}

func (s *registrySource) manifest(ctx context.Context, h v1.Hash, limit int64) ([]byte, error) {
	return s.getManifestUpTo(ctx, h.String(), limit)
}

func (s *registrySource) blob(ctx context.Context, h v1.Hash) (io.ReadCloser, error) {
	resp, err := s.get(ctx, "blobs", h.String())
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp.Body, nil
}

// referrers asks the referrers API, following its pages, and, where the
// registry has none, reads the sha256-<hex> tag's index (the OCI tag
// schema). The API's lists are decoded as they arrive.
func (s *registrySource) referrers(ctx context.Context, h v1.Hash, fn func(v1.Descriptor) error) (string, error) {
	next := fmt.Sprintf("/v2/%s/referrers/%s", s.repo.RepositoryStr(), h)
	for page := 0; next != ""; page++ {
		if page == maxReferrersPages {
			return ReferrersAPI, fmt.Errorf("the referrers of %s run to more than %d pages", h, maxReferrersPages)
		}
		resp, err := s.getPath(ctx, next, string(types.OCIImageIndex))
		if err != nil {
			return "", err
		}
		if page == 0 && (resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), string(types.OCIImageIndex))) {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxManifest))
			resp.Body.Close()
			return ReferrersFallback, s.fallbackReferrers(ctx, h, fn)
		}
		if err := transport.CheckError(resp, http.StatusOK); err != nil {
			resp.Body.Close()
			return ReferrersAPI, err
		}
		err = eachDescriptor(&capReader{r: resp.Body, left: maxReferrersPage, limit: maxReferrersPage, what: "referrers list"}, fn)
		resp.Body.Close()
		if err != nil {
			return ReferrersAPI, err
		}
		next = nextPage(resp.Header.Get("Link"))
	}
	return ReferrersAPI, nil
}

// fallbackReferrers reads the OCI tag schema's index of h's referrers.
func (s *registrySource) fallbackReferrers(ctx context.Context, h v1.Hash, fn func(v1.Descriptor) error) error {
	b, _, err := s.getManifest(ctx, fallbackTag(h))
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the referrers tag %s: %w", fallbackTag(h), err)
	}
	ds, err := parseIndex(b)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// nextPage returns the path and query of a Link header's rel="next"
// target on the same registry, or "".
func nextPage(link string) string {
	for _, l := range strings.Split(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(l), ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil || u.Host != "" || !strings.HasPrefix(u.Path, "/v2/") {
			return ""
		}
		return u.RequestURI()
	}
	return ""
}

// fallbackTag is the OCI tag schema's tag for the referrers of h.
func fallbackTag(h v1.Hash) string { return h.Algorithm + "-" + h.Hex }

// layoutSource reads an OCI image layout directory, through an os.Root
// so that nothing outside it is read.
type layoutSource struct {
	dir   string
	root  *os.Root
	index []v1.Descriptor
	want  *v1.Hash
}

func openLayout(spec string) (*layoutSource, error) {
	dir := spec
	var want *v1.Hash
	if i := strings.LastIndex(spec, "@"); i >= 0 {
		h, err := v1.NewHash(spec[i+1:])
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w\nhint: expected oci-layout:DIR or oci-layout:DIR@sha256:<hex>", LayoutPrefix, spec, err)
		}
		dir, want = spec[:i], &h
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout: %w", err)
	}
	s := &layoutSource{dir: dir, root: root, want: want}
	if _, err := s.read("oci-layout", 4096); err != nil {
		root.Close()
		return nil, fmt.Errorf("%s is not an OCI image layout: %w", dir, err)
	}
	b, err := s.read("index.json", maxManifest)
	if err == nil {
		s.index, err = parseIndex(b)
	}
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("%s: index.json: %w", dir, err)
	}
	return s, nil
}

func (s *layoutSource) name() string { return LayoutPrefix + s.dir }

func (s *layoutSource) close() { s.root.Close() }

// read reads a small file of the layout.
func (s *layoutSource) read(name string, limit int64) ([]byte, error) {
	f, err := s.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, limit, name)
}

func (s *layoutSource) blobPath(h v1.Hash) (string, error) {
	if h.Algorithm != "sha256" || !hexSHA256.MatchString(h.Hex) {
		return "", fmt.Errorf("digest %s: expected sha256:<64 lowercase hex digits>", h)
	}
	return path.Join("blobs", h.Algorithm, h.Hex), nil
}

func (s *layoutSource) blob(_ context.Context, h v1.Hash) (io.ReadCloser, error) {
	p, err := s.blobPath(h)
	if err != nil {
		return nil, err
	}
	return s.root.Open(p)
}

func (s *layoutSource) manifest(_ context.Context, h v1.Hash, limit int64) ([]byte, error) {
	p, err := s.blobPath(h)
	if err != nil {
		return nil, err
	}
	f, err := s.root.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readUpTo(f, limit)
}

// resolve finds the release: the digest asked for, else the one entry
// of index.json whose artifactType is ReleaseArtifactType. The manifest
// read must hash to that digest (and have the entry's size).
func (s *layoutSource) resolve(ctx context.Context) ([]byte, v1.Hash, error) {
	want := v1.Descriptor{Size: -1}
	if s.want != nil {
		want.Digest = *s.want
	} else {
		var found []v1.Descriptor
		for _, d := range s.index {
			if d.ArtifactType == ReleaseArtifactType {
				found = append(found, d)
			}
		}
		switch len(found) {
		case 0:
			return nil, v1.Hash{}, fmt.Errorf("%s: index.json lists no gpuattest release (artifactType %s)", s.name(), ReleaseArtifactType)
		case 1:
			want = found[0]
		default:
			return nil, v1.Hash{}, fmt.Errorf("%s: index.json lists %d releases\nhint: name one: %s@%s", s.name(), len(found), s.name(), found[0].Digest)
		}
	}
	src := s.name() + "@" + want.Digest.String()
	b, err := s.manifest(ctx, want.Digest, maxManifest)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("%s: %w", src, err)
	}
	if len(b) > maxManifest {
		return nil, v1.Hash{}, fmt.Errorf("%s: the manifest is larger than %d bytes", src, maxManifest)
	}
	got, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		return nil, v1.Hash{}, err
	}
	p, _ := s.blobPath(want.Digest)
	if got != want.Digest {
		return nil, v1.Hash{}, fmt.Errorf("%s: %s holds a manifest whose digest is %s, not %s\nhint: the layout was changed after it was written; nothing from it was used", src, p, got, want.Digest)
	}
	if want.Size >= 0 && want.Size != int64(len(b)) {
		return nil, v1.Hash{}, fmt.Errorf("%s: index.json gives the manifest's size as %d bytes, but %s holds %d", src, want.Size, p, len(b))
	}
	return b, got, nil
}

// referrers reads every other manifest index.json lists and passes on
// those whose subject is h.
func (s *layoutSource) referrers(ctx context.Context, h v1.Hash, fn func(v1.Descriptor) error) (string, error) {
	for _, d := range s.index {
		if d.Digest == h || (d.MediaType != types.OCIManifestSchema1 && d.MediaType != "") {
			continue
		}
		b, err := s.manifest(ctx, d.Digest, maxReferrerManifest)
		if err != nil {
			return "", fmt.Errorf("%s: %w", s.name(), err)
		}
		var m v1.Manifest
		if len(b) > maxReferrerManifest || json.Unmarshal(b, &m) != nil || m.Subject == nil || m.Subject.Digest != h {
			continue
		}
		if d.ArtifactType == "" {
			d.ArtifactType = m.ArtifactType
		}
		if err := fn(d); err != nil {
			return "", err
		}
	}
	return ReferrersLayout, nil
}
