package oci

import (
	"bytes"
	"context"
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
)

// LayoutPrefix starts a reference to an OCI image layout directory:
// oci-layout:DIR or oci-layout:DIR@sha256:<hex>.
const LayoutPrefix = "oci-layout:"

// maxManifest is the largest manifest or index read (the distribution
// spec's recommended limit).
const maxManifest = 4 << 20

// source is where a release is read from: a registry repository or an
// OCI image layout.
type source interface {
	// name is the source as shown: REPOSITORY or oci-layout:DIR.
	name() string
	// resolve returns the release manifest's bytes as served and the
	// digest the source knows it by (the one asked for, or the
	// registry's or index's).
	resolve(ctx context.Context) ([]byte, v1.Hash, error)
	// manifest reads the manifest with digest h.
	manifest(ctx context.Context, h v1.Hash) ([]byte, error)
	// referrers lists the manifests that name h as their subject, and
	// says how they were found.
	referrers(ctx context.Context, h v1.Hash) ([]v1.Descriptor, string, error)
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
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s larger than %d bytes", what, limit)
	}
	return b, nil
}

// parseIndex decodes an image index.
func parseIndex(b []byte) ([]v1.Descriptor, error) {
	var idx v1.IndexManifest
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("decoding image index: %w", err)
	}
	return idx.Manifests, nil
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
	u := url.URL{Scheme: s.repo.Scheme(), Host: s.repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/%s/%s", s.repo.RepositoryStr(), kind, id)}
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

func (s *registrySource) resolve(ctx context.Context) ([]byte, v1.Hash, error) {
	raw, hdr, err := s.getManifest(ctx, s.ref.Identifier())
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("fetching %s: %w", s.ref, err)
	}
	if d, ok := s.ref.(name.Digest); ok {
		h, err := v1.NewHash(d.DigestStr())
		return raw, h, err
	}
	if h, err := v1.NewHash(hdr.Get("Docker-Content-Digest")); err == nil {
		return raw, h, nil
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return raw, h, err
}

func (s *registrySource) manifest(ctx context.Context, h v1.Hash) ([]byte, error) {
	b, _, err := s.getManifest(ctx, h.String())
	return b, err
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

// referrers asks the referrers API and, where the registry has none,
// reads the sha256-<hex> tag's index (the OCI tag schema).
func (s *registrySource) referrers(ctx context.Context, h v1.Hash) ([]v1.Descriptor, string, error) {
	resp, err := s.get(ctx, "referrers", h.String(), string(types.OCIImageIndex))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), string(types.OCIImageIndex)) {
		b, err := readLimited(resp.Body, maxManifest, "referrers index")
		if err != nil {
			return nil, "", err
		}
		ds, err := parseIndex(b)
		return ds, ReferrersAPI, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxManifest))
	b, _, err := s.getManifest(ctx, fallbackTag(h))
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return nil, ReferrersFallback, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading the referrers tag %s: %w", fallbackTag(h), err)
	}
	ds, err := parseIndex(b)
	return ds, ReferrersFallback, err
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

func (s *layoutSource) manifest(_ context.Context, h v1.Hash) ([]byte, error) {
	p, err := s.blobPath(h)
	if err != nil {
		return nil, err
	}
	return s.read(p, maxManifest)
}

// resolve finds the release: the digest asked for, else the one entry
// of index.json whose artifactType is ReleaseArtifactType.
func (s *layoutSource) resolve(ctx context.Context) ([]byte, v1.Hash, error) {
	if s.want != nil {
		b, err := s.manifest(ctx, *s.want)
		return b, *s.want, err
	}
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
		b, err := s.manifest(ctx, found[0].Digest)
		return b, found[0].Digest, err
	}
	return nil, v1.Hash{}, fmt.Errorf("%s: index.json lists %d releases\nhint: name one: %s@%s", s.name(), len(found), s.name(), found[0].Digest)
}

// referrers reads every other manifest index.json lists and keeps those
// whose subject is h.
func (s *layoutSource) referrers(ctx context.Context, h v1.Hash) ([]v1.Descriptor, string, error) {
	var out []v1.Descriptor
	for _, d := range s.index {
		if d.Digest == h || (d.MediaType != types.OCIManifestSchema1 && d.MediaType != "") {
			continue
		}
		b, err := s.manifest(ctx, d.Digest)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", s.name(), err)
		}
		var m v1.Manifest
		if json.Unmarshal(b, &m) != nil || m.Subject == nil || m.Subject.Digest != h {
			continue
		}
		if d.ArtifactType == "" {
			d.ArtifactType = m.ArtifactType
		}
		out = append(out, d)
	}
	return out, ReferrersLayout, nil
}
