package oci_test

import (
	"encoding/json"
	"errors"
	"fmt"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/registrytest"
)

// sibling is another release of f's files' kind, signed with f's key.
func (f *fixture) sibling(t *testing.T) *fixture {
	t.Helper()
	g := newFixture(t, 1, 100)
	g.keys = f.keys
	g.bundles = g.sign(t, g.subjects())
	return g
}

// TestLyingRegistry: a registry that serves another signed release's
// manifest under the digest asked for, or a
// Docker-Content-Digest that is not the manifest's, is refused before
// anything else is read, with the reference and both digests named.
func TestLyingRegistry(t *testing.T) {
	t.Parallel()
	a := newFixture(t, 2, 1000)
	b := a.sibling(t)
	da, db := a.rel.Digest(), b.rel.Digest()
	var mode atomic.Value
	mode.Store("")
	host := registrytest.StartInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch m := mode.Load().(string); {
			case m == "swap" && strings.HasSuffix(r.URL.Path, "/manifests/"+da):
				// B's bytes under A's digest, with A's digest in the
				// header.
				r.URL.Path = strings.Replace(r.URL.Path, da, db, 1)
				h.ServeHTTP(registrytest.LyingHeader{ResponseWriter: w, Digest: da}, r)
			case m == "header" && strings.Contains(r.URL.Path, "/manifests/"):
				h.ServeHTTP(registrytest.LyingHeader{ResponseWriter: w, Digest: db}, r)
			case m == "header-algorithm" && strings.Contains(r.URL.Path, "/manifests/"):
				h.ServeHTTP(registrytest.LyingHeader{ResponseWriter: w, Digest: "md5:0123"}, r)
			default:
				h.ServeHTTP(w, r)
			}
		})
	})
	for _, f := range []*fixture{a, b} {
		if _, err := oci.Push(ctx(t), host+"/r:"+f.rel.Digest()[7:19], f.rel, f.bundles); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := oci.Push(ctx(t), host+"/r:v1", a.rel, a.bundles); err != nil {
		t.Fatal(err)
	}
	// B's bundles are also referrers of A (a referrer's subject is not
	// signed): before the manifest was hashed, A's digest served B's
	// manifest, B's files verified against B's bundles, and A's digest
	// was reported verified.
	if _, err := oci.Push(ctx(t), host+"/r:v1", a.rel, b.bundles); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode, ref string
		want      []string
	}{
		{"swap", host + "/r@" + da, []string{"fetching " + host + "/r@" + da, "digest is " + db, "not " + da, "the digest asked for"}},
		{"header", host + "/r:v1", []string{"fetching " + host + "/r:v1", "Docker-Content-Digest is " + db, "has digest " + da}},
		{"header", host + "/r@" + da, []string{"Docker-Content-Digest is " + db, "has digest " + da}},
		{"header-algorithm", host + "/r:v1", []string{"Docker-Content-Digest", "md5:0123", "expected sha256"}},
	}
	for _, tt := range tests {
		mode.Store(tt.mode)
		out := filepath.Join(t.TempDir(), "out")
		res, err := oci.Verify(ctx(t), a.verifier(t), tt.ref, oci.WithFilesTo(out))
		if err == nil {
			t.Errorf("%s %s: verified (digest %s, %v), want an error", tt.mode, tt.ref, res.Digest, res.Report.Verified)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: error %q\nwant it to contain %q", tt.mode, tt.ref, err, w)
			}
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%s: %s was written", tt.mode, out)
		}
	}
	mode.Store("")
	res, err := oci.Verify(ctx(t), a.verifier(t), host+"/r@"+da)
	if err != nil || !res.Report.Verified || res.Digest != da {
		t.Fatalf("the honest registry: %v %+v", err, res)
	}
}

// TestLyingLayout: a layout whose blob under the release's digest holds
// another release's manifest (both signed by the same key, B's files and
// bundles copied in) is refused, whether the digest is named or comes
// from index.json.
func TestLyingLayout(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	a := newFixture(t, 2, 1000)
	b := a.sibling(t)
	la, lb := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, x := range []struct {
		f   *fixture
		dir string
	}{{a, la}, {b, lb}} {
		if _, err := oci.Push(ctx(t), host+"/r:v1", x.f.rel, x.f.bundles); err != nil {
			t.Fatal(err)
		}
		if res, err := oci.Verify(ctx(t), a.verifier(t), host+"/r@"+x.f.rel.Digest(), oci.WithLayoutTo(x.dir)); err != nil || !res.Report.Verified {
			t.Fatalf("layout copy: %v %+v", err, res)
		}
	}
	blobs := func(dir string) string { return filepath.Join(dir, "blobs", "sha256") }
	entries, err := os.ReadDir(blobs(lb))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(blobs(lb), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(blobs(la), e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	da, db := a.rel.Digest(), b.rel.Digest()
	if err := os.WriteFile(filepath.Join(blobs(la), da[7:]), b.rel.Manifest(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{oci.LayoutPrefix + la, oci.LayoutPrefix + la + "@" + da} {
		res, err := oci.Verify(ctx(t), a.verifier(t), ref)
		if err == nil {
			t.Errorf("%s: verified (digest %s, %v), want an error", ref, res.Digest, res.Report.Verified)
			continue
		}
		for _, w := range []string{la + "@" + da, "digest is " + db, "not " + da} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q\nwant it to contain %q", ref, err, w)
			}
		}
	}
}

// startStub serves manifest with no referrers and endless blobs.
func startStub(t *testing.T, manifest []byte) *registrytest.Stub {
	s, stop := registrytest.ServeStub(manifest)
	t.Cleanup(stop)
	return s
}

// hugeRelease is a release manifest whose one file claims size bytes.
func hugeRelease(t *testing.T, size int64) []byte {
	t.Helper()
	rel, err := oci.NewRelease([]oci.File{{Name: "huge.bin", SHA256: strings.Repeat("ab", 32), Size: size}})
	if err != nil {
		t.Fatal(err)
	}
	return rel.Manifest()
}

// TestNoBundlesFetchesNoLayer: a release whose one layer claims 1 GiB
// and that has no bundles fails without a byte of the layer fetched.
func TestNoBundlesFetchesNoLayer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 10)
	s := startStub(t, hugeRelease(t, 1<<30))
	parent := t.TempDir()
	start := time.Now()
	res, err := oci.Verify(ctx(t), f.verifier(t), s.Host+"/r:v1", oci.WithFilesTo(filepath.Join(parent, "out")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Verified || res.NotFetched == "" || len(res.Files) != 0 {
		t.Errorf("verified %v, not fetched %q, files %v: want a failed report that says the files were not fetched", res.Report.Verified, res.NotFetched, res.Files)
	}
	if !strings.Contains(res.NotFetched, "1 file(s), 1073741824 bytes") {
		t.Errorf("not fetched: %q", res.NotFetched)
	}
	if n := s.Served.Load(); n != 0 {
		t.Errorf("the registry served %d bytes of the layer, want none", n)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("left %v behind", left)
	}
	t.Logf("refused in %s", time.Since(start).Round(time.Millisecond))
}

// TestLayerSizeLimits: files over --max-layer-size or adding up to more
// than --max-total-size are refused before anything is fetched, signed
// or not.
func TestLayerSizeLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2, 1000)
	tests := []struct {
		name     string
		manifest []byte
		opts     []oci.Option
		want     string
	}{
		{"default layer limit", hugeRelease(t, oci.DefaultMaxLayerSize+1), nil, "more than the 1073741824 a file may be"},
		{"layer limit", f.rel.Manifest(), []oci.Option{oci.WithMaxLayerSize(999)}, "--max-layer-size"},
		{"total limit", f.rel.Manifest(), []oci.Option{oci.WithMaxTotalSize(1999)}, "--max-total-size"},
	}
	for _, tt := range tests {
		s := startStub(t, tt.manifest)
		_, err := oci.Verify(ctx(t), f.verifier(t), s.Host+"/r:v1", tt.opts...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "nothing was fetched") {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
		if n := s.Served.Load(); n != 0 {
			t.Errorf("%s: %d bytes of layers served", tt.name, n)
		}
	}
	host := registrytest.StartInProcess(t, nil)
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1", oci.WithMaxLayerSize(1000), oci.WithMaxTotalSize(2000))
	if err != nil || !res.Report.Verified {
		t.Errorf("a release at the limits: %v %+v", err, res)
	}
}

// TestJunkReferrers: a release with thousands of junk referrers beside
// its two bundles verifies; junk that its listing shows cannot be a
// bundle is never fetched, the rest is fetched at most 8 at a time. With
// GPUATTEST_REFERRERS=25000 it runs the 25,000 and logs this
// process's peak RSS (the registry's included); bench/adversarial
// measures the gpuattest process alone.
func TestJunkReferrers(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of requests")
	}
	t.Parallel()
	n := 3000
	if v := os.Getenv("GPUATTEST_REFERRERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, 2, 1000)
	j := registrytest.NewJunk(n, f.rel.Digest())
	host := registrytest.StartInProcess(t, j.Wrap)
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.Verified || len(res.Report.Bundles) != 2 {
		t.Fatalf("verify with %d junk referrers: %v", n, failed(res.Report))
	}
	if res.SkippedCount != n || len(res.Skipped) != 100 {
		t.Errorf("skipped %d (listed %d), want %d (listed 100)", res.SkippedCount, len(res.Skipped), n)
	}
	if u := j.Unfit.Load(); u != 0 {
		t.Errorf("%d referrers fetched whose listing shows they are not bundles", u)
	}
	if got, want := j.Fetched.Load(), int64(j.Fetchable()); got != want {
		t.Errorf("%d junk manifests fetched, want the %d listed with the empty config's artifactType", got, want)
	}
	if m := j.MaxInFlight.Load(); m > 8 {
		t.Errorf("%d referrer manifests in flight at once, want 8 at most", m)
	}
	t.Logf("%d junk referrers: verified in %s, %d fetched, at most %d in flight, peak RSS of this process %s",
		n, time.Since(start).Round(time.Millisecond), j.Fetched.Load(), j.MaxInFlight.Load(), peakRSS())
}

// peakRSS is this process's VmHWM.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// trickle serves a registry that sends a byte every gap (0: nothing).
func trickle(t *testing.T, gap time.Duration) string {
	host, stop := registrytest.ServeTrickle(gap)
	t.Cleanup(stop)
	return host
}

// TestTricklingRegistry: a registry that sends a byte every few seconds,
// or never answers, fails promptly (the timeouts made small here) with
// an error naming its host and the flag to raise.
func TestTricklingRegistry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 10)
	tests := []struct {
		name string
		gap  time.Duration
		opts []oci.Option
		want []string
		as   any
	}{
		{"byte every 3s", 3 * time.Second, []oci.Option{oci.WithIdleTimeout(200 * time.Millisecond)}, []string{"sent nothing for 200ms", "--registry-idle-timeout"}, new(*oci.StalledError)},
		{"no answer", 0, []oci.Option{oci.WithIdleTimeout(200 * time.Millisecond)}, []string{"sent nothing for 200ms", "--registry-idle-timeout"}, new(*oci.StalledError)},
		{"byte every 50ms", 50 * time.Millisecond, []oci.Option{oci.WithIdleTimeout(time.Second), oci.WithTimeout(700 * time.Millisecond)}, []string{"overall timeout of 700ms", "--registry-timeout"}, new(*oci.TimeoutError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := trickle(t, tt.gap)
			start := time.Now()
			_, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1", append(tt.opts, fast)...)
			took := time.Since(start)
			if err == nil {
				t.Fatal("verified a registry that sends nothing")
			}
			for _, w := range append(tt.want, "registry "+host) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
			if !errors.As(err, tt.as) {
				t.Errorf("error %T does not wrap %T", err, tt.as)
			}
			if took > 5*time.Second {
				t.Errorf("took %s to give up", took)
			}
		})
	}
}

// TestReferrersPages: a registry that pages its referrers list (the
// distribution spec's Link: <...>; rel="next") is followed to the last
// page: both bundles are found.
func TestReferrersPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 100)
	var pages atomic.Int32
	host := registrytest.StartInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.URL.Path, "/referrers/") {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var idx v1.IndexManifest
			if err := json.Unmarshal(rec.Body.Bytes(), &idx); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			// The registry lists them in map order: sort them, for the
			// pages to split one list.
			sort.Slice(idx.Manifests, func(i, j int) bool { return idx.Manifests[i].Digest.Hex < idx.Manifests[j].Digest.Hex })
			page, _ := strconv.Atoi(r.URL.Query().Get("page"))
			pages.Add(1)
			if page+1 < len(idx.Manifests) {
				w.Header().Set("Link", fmt.Sprintf(`<%s?page=%d>; rel="next"`, r.URL.Path, page+1))
			}
			if page < len(idx.Manifests) {
				idx.Manifests = idx.Manifests[page : page+1]
			} else {
				idx.Manifests = nil
			}
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			json.NewEncoder(w).Encode(idx)
		})
	})
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	pages.Store(0)
	res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1")
	if err != nil || !res.Report.Verified || len(res.Report.Bundles) != 2 {
		t.Fatalf("verify through paged referrers: %v %+v, %d pages, %d bundles %v", err, res, pages.Load(), len(res.Report.Bundles), failed(res.Report))
	}
	if n := pages.Load(); n != 2 {
		t.Errorf("%d pages read, want 2", n)
	}
}
