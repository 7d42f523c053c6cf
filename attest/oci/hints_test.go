package oci_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/registrytest"
)

// manifestCounter counts the manifests a registry serves other than the
// release's (the referrer manifests), and the blobs.
type manifestCounter struct {
	release          string
	referrers, blobs atomic.Int64
}

func (c *manifestCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/manifests/sha256:") && !strings.HasSuffix(r.URL.Path, c.release):
			c.referrers.Add(1)
		case strings.Contains(r.URL.Path, "/blobs/"):
			c.blobs.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

// TestBundleHintsSkipReferrerManifests: a release pushed by this version
// lists its bundles' digests and sizes on the referrer descriptors, so
// verify fetches no referrer manifest, and each bundle and file once
// (the history benchmark counts it on docker-registry, whose tag
// schema's index lists the same descriptors).
func TestBundleHintsSkipReferrerManifests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2, 1000)
	c := &manifestCounter{release: f.rel.Digest()}
	host := registrytest.StartInProcess(t, c.wrap)
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	c.referrers.Store(0)
	c.blobs.Store(0)
	res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.Verified || len(res.Report.Bundles) != 2 {
		t.Fatalf("verify: %v", failed(res.Report))
	}
	if n, b := c.referrers.Load(), c.blobs.Load(); n != 0 || b != 4 {
		t.Errorf("%d referrer manifests and %d blobs fetched, want none and 4 (2 bundles, 2 files)", n, b)
	}
}

// TestBundleHintsAbsent: referrers pushed without the hints (by an older
// gpuattest, or cosign) are read through their manifests, and verify.
func TestBundleHintsAbsent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 100)
	c := &manifestCounter{release: f.rel.Digest()}
	host := registrytest.StartInProcess(t, c.wrap)
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, nil); err != nil {
		t.Fatal(err)
	}
	for _, b := range f.bundles {
		putReferrer(t, host+"/r", f.rel, b, b.Data, nil)
	}
	c.referrers.Store(0)
	res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.Verified || len(res.Report.Bundles) != 2 {
		t.Fatalf("verify: %v", failed(res.Report))
	}
	if n := c.referrers.Load(); n != 2 {
		t.Errorf("%d referrer manifests fetched, want both", n)
	}
}

// TestBundleHintsLie: a referrer whose hint names another bundle (one of
// another release, one of this release, one not there) or the wrong
// size is read through its manifest: verify reads the same bundles as
// without the hints, each once.
func TestBundleHintsLie(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 100)
	other := f.sibling(t)
	missing := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		hint func(own []byte) (digest string, size int)
	}{
		{"another release's bundle", func([]byte) (string, int) {
			return "sha256:" + sha256hex(other.bundles[1].Data), len(other.bundles[1].Data)
		}},
		{"this release's other bundle", func([]byte) (string, int) { return "sha256:" + sha256hex(f.bundles[0].Data), len(f.bundles[0].Data) }},
		{"no such blob", func(own []byte) (string, int) { return "sha256:" + missing, len(own) }},
		{"wrong size", func(own []byte) (string, int) { return "sha256:" + sha256hex(own), len(own) - 1 }},
		{"not a digest", func(own []byte) (string, int) { return "md5:00", len(own) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := registrytest.StartInProcess(t, nil)
			if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles[:1]); err != nil {
				t.Fatal(err)
			}
			if _, err := oci.Push(ctx(t), host+"/r:other", other.rel, other.bundles); err != nil {
				t.Fatal(err)
			}
			own := f.bundles[1].Data
			d, size := tc.hint(own)
			putReferrer(t, host+"/r", f.rel, f.bundles[1], own, map[string]string{oci.AnnotationBundleDigest: d, oci.AnnotationBundleSize: strconv.Itoa(size)})
			res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1")
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, b := range res.Report.Bundles {
				if !b.Verified {
					t.Errorf("bundle %s did not verify", b.Source)
				}
				types = append(types, b.PredicateType)
			}
			slices.Sort(types)
			if !res.Report.Verified || !slices.Equal(types, []string{typeA, typeB}) {
				t.Errorf("verified %v, bundles of types %v, want %s and %s once each: %v", res.Report.Verified, types, typeA, typeB, failed(res.Report))
			}
		})
	}
}

// putReferrer pushes a bundle referrer of rel holding data, with the
// annotations given (none of the hints when ann is nil).
func putReferrer(t *testing.T, repo string, rel *oci.Release, b oci.Bundle, data []byte, ann map[string]string) {
	t.Helper()
	r, err := name.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	layer := static.NewLayer(data, oci.BundleMediaType)
	empty := static.NewLayer([]byte("{}"), oci.EmptyConfigMediaType)
	for _, l := range []v1.Layer{layer, empty} {
		if err := remote.WriteLayer(r, l, remote.WithContext(ctx(t))); err != nil {
			t.Fatal(err)
		}
	}
	ld, _ := layer.Digest()
	sub, _ := v1.NewHash(rel.Digest())
	relRaw := rel.Manifest()
	annotations := map[string]string{oci.AnnotationBundleContent: oci.BundleContentDSSE, oci.AnnotationPredicateType: b.PredicateType}
	for k, v := range ann {
		annotations[k] = v
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: oci.BundleMediaType,
		Config:      v1.Descriptor{MediaType: oci.EmptyConfigMediaType, Digest: mustHash(t, []byte("{}")), Size: 2},
		Layers:      []v1.Descriptor{{MediaType: oci.BundleMediaType, Digest: ld, Size: int64(len(data))}},
		Subject:     &v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: sub, Size: int64(len(relRaw))},
		Annotations: annotations}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(r.Digest("sha256:"+sha256hex(raw)), rawManifest(raw), remote.WithContext(ctx(t))); err != nil {
		t.Fatal(err)
	}
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

func mustHash(t *testing.T, b []byte) v1.Hash {
	t.Helper()
	h, err := v1.NewHash("sha256:" + sha256hex(b))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestBundleCache: a second verify reads the bundles from the cache, no
// bundle blob from the registry; a cached file changed on disk is
// hashed, found out, removed and fetched again, and the result is the
// same; Trim bounds the directory.
func TestBundleCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 100)
	c := &manifestCounter{release: f.rel.Digest()}
	host := registrytest.StartInProcess(t, c.wrap)
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cache, err := oci.OpenBundleCache(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	run := func(wantBlobs int64) {
		t.Helper()
		c.blobs.Store(0)
		res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1", oci.WithBundleCache(cache))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Report.Verified || len(res.Report.Bundles) != 2 {
			t.Fatalf("verify: %v", failed(res.Report))
		}
		if n := c.blobs.Load(); n != wantBlobs {
			t.Errorf("%d blobs fetched, want %d", n, wantBlobs)
		}
	}
	run(3) // 2 bundles, 1 file
	run(1) // the file only
	cached := filepath.Join(dir, "sha256", sha256hex(f.bundles[0].Data))
	tampered := bytes.Replace(f.bundles[0].Data, []byte(`"payload"`), []byte(`"payloaD"`), 1)
	if err := os.WriteFile(cached, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	run(2) // the tampered bundle again, and the file
	if got, err := os.ReadFile(cached); err != nil || !bytes.Equal(got, f.bundles[0].Data) {
		t.Errorf("cached bundle after the tampered file was found out: %v (the bundle: %v)", err, bytes.Equal(got, f.bundles[0].Data))
	}
	small, err := oci.OpenBundleCache(dir, int64(max(len(f.bundles[0].Data), len(f.bundles[1].Data))))
	if err != nil {
		t.Fatal(err)
	}
	if err := small.Trim(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "sha256"))
	if len(ents) != 1 {
		t.Errorf("after Trim to one bundle's size, %d files left, want 1", len(ents))
	}
}
