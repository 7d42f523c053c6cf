package oci_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/registrytest"
)

// ctx bounds a network test in time.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

var fast = oci.WithRetryBackoff(remote.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 3})

func TestNewReleaseIsDeterministic(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3, 100)
	rev := append([]oci.File(nil), f.files...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	again, err := oci.NewRelease(rev)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest() != f.rel.Digest() || !bytes.Equal(again.Manifest(), f.rel.Manifest()) {
		t.Errorf("the same files in another order made another manifest:\n%s\n%s", f.rel.Manifest(), again.Manifest())
	}
	m := string(f.rel.Manifest())
	for _, want := range []string{`"artifactType":"` + oci.ReleaseArtifactType + `"`, `"mediaType":"application/vnd.oci.empty.v1+json"`, `"org.opencontainers.image.title":"kernels/k0.bin"`} {
		if !strings.Contains(m, want) {
			t.Errorf("manifest lacks %s:\n%s", want, m)
		}
	}
	if strings.Contains(m, "created") {
		t.Errorf("manifest carries a timestamp:\n%s", m)
	}
}

func TestNewReleaseRefuses(t *testing.T) {
	t.Parallel()
	ok := oci.File{Name: "a.bin", SHA256: strings.Repeat("a", 64), Size: 1}
	tests := []struct {
		name    string
		files   []oci.File
		wantErr string
	}{
		{"none", nil, "no files"},
		{"absolute", []oci.File{{Name: "/etc/x", SHA256: ok.SHA256}}, "clean relative path"},
		{"climbs", []oci.File{{Name: "../x", SHA256: ok.SHA256}}, "leaves the directory"},
		{"unclean", []oci.File{{Name: "a//b", SHA256: ok.SHA256}}, "clean relative path"},
		{"control", []oci.File{{Name: "a\x1b[2Jb", SHA256: ok.SHA256}}, "control"},
		{"backslash", []oci.File{{Name: `a\b`, SHA256: ok.SHA256}}, "backslash"},
		{"reserved", []oci.File{{Name: oci.ManifestSubjectName, SHA256: ok.SHA256}}, "reserved"},
		{"twice", []oci.File{ok, ok}, "listed twice"},
		{"file and dir", []oci.File{ok, {Name: "a.bin/c", SHA256: ok.SHA256}}, "cannot be a directory"},
		{"bad digest", []oci.File{{Name: "a", SHA256: "XYZ"}}, "64 lowercase hex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := oci.NewRelease(tt.files)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestPushVerifyPullAPI: a registry with the referrers API. Push twice
// (the second writes nothing), verify, pull files and a layout copy, and
// verify the copy offline.
func TestPushVerifyPullAPI(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	roundTrip(t, host, oci.ReferrersAPI)
}

// TestPushVerifyPullFallback: docker-registry (distribution 2.8) has no
// referrers API: the bundles go into the sha256-<hex> tag's index.
func TestPushVerifyPullFallback(t *testing.T) {
	t.Parallel()
	d := registrytest.StartDocker(t)
	roundTrip(t, d.Host, oci.ReferrersFallback)
}

func roundTrip(t *testing.T, host, how string) {
	f := newFixture(t, 3, 64<<10)
	ref := host + "/kernels/release:v1"
	res, err := oci.Push(ctx(t), ref, f.rel, f.bundles)
	if err != nil {
		t.Fatal(err)
	}
	want := &oci.PushResult{Ref: host + "/kernels/release@" + f.rel.Digest(), Tag: "v1", Digest: f.rel.Digest(), Files: 3, Bundles: 2, Written: 2, Referrers: how}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("push (-want +got):\n%s", diff)
	}
	again, err := oci.Push(ctx(t), ref, f.rel, f.bundles)
	if err != nil {
		t.Fatal(err)
	}
	want.Written = 0
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("second push (-want +got):\n%s", diff)
	}

	out := filepath.Join(t.TempDir(), "out")
	layout := filepath.Join(t.TempDir(), "layout")
	var crit oci.Criteria
	vr, err := oci.Verify(ctx(t), f.verifier(t), ref, oci.WithFilesTo(out), oci.WithLayoutTo(layout), oci.WithCriteria(func(c oci.Criteria) { crit = c }))
	if err != nil {
		t.Fatal(err)
	}
	if !vr.Report.Verified {
		t.Fatalf("verify %s: %v", ref, failed(vr.Report))
	}
	if vr.Digest != f.rel.Digest() || vr.Referrers != how || crit.Bundles != 2 || len(vr.Report.Artifacts) != 4 {
		t.Errorf("verify result %+v, criteria %+v", vr, crit)
	}
	for name, b := range f.content {
		got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("pulled %s: %v (equal %v)", name, err, bytes.Equal(got, b))
		}
	}
	off, err := oci.Verify(ctx(t), f.verifier(t), oci.LayoutPrefix+layout)
	if err != nil {
		t.Fatal(err)
	}
	if !off.Report.Verified || off.Digest != f.rel.Digest() || off.Referrers != oci.ReferrersLayout {
		t.Fatalf("verify of the layout copy: %+v %v", off, failed(off.Report))
	}
	byDigest, err := oci.Verify(ctx(t), f.verifier(t), res.Ref)
	if err != nil || !byDigest.Report.Verified {
		t.Fatalf("verify by digest: %v %v", err, byDigest)
	}
}

// TestTamperedStorage changes blobs in docker-registry's storage: a
// layer is then not a subject (11), a bundle not signed (10), and pull
// writes nothing.
func TestTamperedStorage(t *testing.T) {
	t.Parallel()
	d := registrytest.StartDocker(t)
	f := newFixture(t, 2, 4096)
	bundleDigest := func(b oci.Bundle) string {
		return sha256hex(b.Data)
	}
	tests := []struct {
		name string
		blob string
		want verify.Failure
	}{
		{"layer", "sha256:" + f.files[1].SHA256, verify.FailureSubject},
		{"bundle", "sha256:" + bundleDigest(f.bundles[0]), verify.FailureSignature},
	}
	for i, tt := range tests {
		ref := d.Host + "/tamper" + string(rune('a'+i)) + ":v1"
		if _, err := oci.Push(ctx(t), ref, f.rel, f.bundles); err != nil {
			t.Fatal(err)
		}
		p := d.BlobPath(tt.blob)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 1
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		res, err := oci.Verify(ctx(t), f.verifier(t), ref, oci.WithFilesTo(out), oci.WithLayoutTo(filepath.Join(parent, "layout")))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.Report.Failure != tt.want {
			t.Errorf("%s changed: failure %s, want %s: %v", tt.name, res.Report.Failure, tt.want, failed(res.Report))
		}
		if left, _ := os.ReadDir(parent); len(left) != 0 {
			t.Errorf("%s changed: pull left %v behind", tt.name, left)
		}
		// Restore it for the next case's registry state to be clean.
		b[len(b)/2] ^= 1
		_ = os.WriteFile(p, b, 0o644)
	}
}

// TestPushCompletesAfterFailure: the registry fails the fallback index's
// update once (as a push killed between the referrer and its index
// would leave it); pushing again completes it. 503s are retried.
func TestPushCompletesAfterFailure(t *testing.T) {
	t.Parallel()
	var failedIndex, unavailable atomic.Int32
	host := registrytest.StartInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead && unavailable.Add(1) <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/sha256:") && failedIndex.Add(1) == 2 {
				http.Error(w, "killed", http.StatusBadRequest)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	f := newFixture(t, 2, 1024)
	ref := host + "/crash:v1"
	if _, err := oci.Push(ctx(t), ref, f.rel, f.bundles, fast); err == nil {
		t.Fatal("push succeeded although the registry refused a referrer")
	}
	res, err := oci.Push(ctx(t), ref, f.rel, f.bundles, fast)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 1 {
		t.Errorf("second push wrote %d referrers, want the 1 missing", res.Written)
	}
	vr, err := oci.Verify(ctx(t), f.verifier(t), ref, fast)
	if err != nil || !vr.Report.Verified || len(vr.Report.Bundles) != 2 {
		t.Fatalf("verify after the completed push: %v %+v", err, vr)
	}
}

func TestVerifyRefusesOtherArtifacts(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	f := newFixture(t, 1, 10)
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	_, err := oci.Verify(ctx(t), f.verifier(t), host+"/r@sha256:"+strings.Repeat("0", 64))
	if err == nil || !strings.Contains(err.Error(), "MANIFEST_UNKNOWN") && !strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown digest: err = %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(filepath.Join(out, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1", oci.WithFilesTo(out)); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("pull into a non-empty directory: err = %v", err)
	}
}

// TestPullFiles: the files of a release, all or some, by digest from
// docker-registry, with no bundle; a file the registry serves changed is
// refused and nothing is written.
func TestPullFiles(t *testing.T) {
	t.Parallel()
	d := registrytest.StartDocker(t)
	f := newFixture(t, 3, 4096)
	res, err := oci.Push(ctx(t), d.Host+"/stage:x", f.rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "all")
	got, err := oci.PullFiles(ctx(t), res.Ref, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != f.rel.Digest() || len(got.Files) != 3 {
		t.Errorf("pulled %+v", got)
	}
	for name, b := range f.content {
		if have, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name))); err != nil || !bytes.Equal(have, b) {
			t.Errorf("%s: %v", name, err)
		}
	}
	one := f.rel.Files()[0].Name
	some := filepath.Join(t.TempDir(), "some")
	if got, err := oci.PullFiles(ctx(t), res.Ref, some, []string{one}); err != nil || len(got.Files) != 1 || got.Files[0].Name != one {
		t.Errorf("pulling %s alone: %+v, %v", one, got, err)
	}
	if _, err := oci.PullFiles(ctx(t), res.Ref, filepath.Join(t.TempDir(), "x"), []string{"nope"}); err == nil {
		t.Error("pulling a file the release does not have: no error")
	}
	blob := d.BlobPath("sha256:" + f.rel.Files()[1].SHA256)
	if err := os.WriteFile(blob, bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if _, err := oci.PullFiles(ctx(t), res.Ref, bad, nil); err == nil || !strings.Contains(err.Error(), "the manifest names") {
		t.Errorf("changed blob: err = %v", err)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a refused pull left %s: %v", bad, err)
	}
}

// TestPullWithCheck: Pull hands the caller what it read (files hashed as
// served, bundles unverified) and writes the files and the layout copy
// only when the caller's check passes; a check that fails or errs leaves
// nothing behind.
func TestPullWithCheck(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	f := newFixture(t, 2, 4096)
	ref := host + "/kernels/pull:v1"
	if _, err := oci.Push(ctx(t), ref, f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	pull := func(ok bool, cerr error) (*oci.Fetched, string, string, error) {
		dir := t.TempDir()
		out, layout := filepath.Join(dir, "out"), filepath.Join(dir, "layout")
		got, err := oci.Pull(ctx(t), f.verifier(t), ref, func(_ context.Context, fe *oci.Fetched) (bool, error) {
			if len(fe.Files) != 2 || len(fe.Entries) != 2 || fe.Digest != f.rel.Digest() {
				t.Errorf("check sees %+v", fe)
			}
			for _, fl := range fe.Files {
				if fl.SHA256 != sha256hex(f.content[fl.Name]) {
					t.Errorf("check sees %s as %s", fl.Name, fl.SHA256)
				}
			}
			return ok, cerr
		}, oci.WithFilesTo(out), oci.WithLayoutTo(layout))
		return got, out, layout, err
	}
	got, out, layout, err := pull(true, nil)
	if err != nil || got.FilesDir != out || got.LayoutDir != layout {
		t.Fatalf("pull with a check that passes: %+v, %v", got, err)
	}
	for name, b := range f.content {
		if have, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name))); err != nil || !bytes.Equal(have, b) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if off, err := oci.Verify(ctx(t), f.verifier(t), oci.LayoutPrefix+layout); err != nil || !off.Report.Verified {
		t.Errorf("verify of the layout Pull wrote: %+v, %v", off, err)
	}
	for _, c := range []struct {
		ok  bool
		err error
	}{{false, nil}, {true, errors.New("check failed to run")}} {
		got, out, layout, err := pull(c.ok, c.err)
		if (c.err == nil) != (err == nil) || (got != nil && (got.FilesDir != "" || got.LayoutDir != "")) {
			t.Errorf("pull with check (%v, %v): %+v, %v", c.ok, c.err, got, err)
		}
		for _, d := range []string{out, layout} {
			if entries, _ := os.ReadDir(filepath.Dir(d)); len(entries) != 0 {
				t.Errorf("pull with check (%v, %v) left %v", c.ok, c.err, entries)
			}
		}
	}
}
