package image

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var fixedNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return fixedNow }

// newRegistry serves go-containerregistry's in-memory registry on
// 127.0.0.1 and returns its host:port.
func newRegistry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t testing.TB, ref string, img v1.Image) v1.Hash {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, _ := img.Digest()
	return d
}

func pushIndex(t testing.TB, ref string, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, _ := idx.Digest()
	return d
}

// platformImage is a small image whose config says os/arch and which
// holds /platform naming it.
func platformImage(t testing.TB, os, arch string) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layerOf(t, file("platform", os+"/"+arch)))
	if err != nil {
		t.Fatal(err)
	}
	cf := mustCfg(t, img)
	cf.OS, cf.Architecture = os, arch
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// multiIndex builds an index of linux/amd64 and linux/arm64 images plus an
// attestation manifest (unknown/unknown), as buildx pushes them.
func multiIndex(t testing.TB) (v1.ImageIndex, map[string]v1.Hash) {
	t.Helper()
	digests := map[string]v1.Hash{}
	var adds []mutate.IndexAddendum
	for _, p := range []v1.Platform{{OS: "unknown", Architecture: "unknown"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}, {OS: "linux", Architecture: "amd64"}} {
		img := platformImage(t, p.OS, p.Architecture)
		d, _ := img.Digest()
		digests[p.String()] = d
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(empty.Index, adds...), digests
}

func TestParseSource(t *testing.T) {
	t.Parallel()
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		src      string
		kind     SourceKind
		path     string
		digest   string
		tag      string
		floating bool
		wantErr  string
	}{
		{src: "ubuntu:22.04", kind: Registry, tag: "22.04", floating: true},
		{src: "ubuntu", kind: Registry, tag: "latest", floating: true},
		{src: "127.0.0.1:5000/cuda/devel@" + d, kind: Registry, digest: d},
		{src: "nvidia/cuda:12.4.1-devel-ubuntu22.04@" + d, kind: Registry, digest: d, tag: "12.4.1-devel-ubuntu22.04"},
		{src: "oci-layout:images/cuda", kind: OCILayout, path: "images/cuda", floating: true},
		{src: "oci-layout:/abs/cuda@" + d, kind: OCILayout, path: "/abs/cuda", digest: d},
		{src: "docker-archive:cuda.tar", kind: DockerArchive, path: "cuda.tar", floating: true},
		{src: "docker-archive:cuda.tar@" + d, kind: DockerArchive, path: "cuda.tar", digest: d},
		{src: "", wantErr: "empty or surrounded by spaces"},
		{src: " ubuntu", wantErr: "empty or surrounded by spaces"},
		{src: "oci-layout:", wantErr: "missing path"},
		{src: "oci-layout:dir@sha256:abc", wantErr: `"sha256:abc" is not a sha256 digest`},
		{src: "docker-archive:x.tar@md5:abc", wantErr: "is not a sha256 digest"},
		{src: "docker://ubuntu", wantErr: `unknown scheme "docker"`},
		{src: "UPPER/case:tag", wantErr: "not a valid registry reference"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSource(tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSource(%q) err = %v, want %q", tt.src, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "hint:") {
					t.Errorf("error has no hint: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []any{s.Kind, s.Path, s.Digest, s.Tag, s.Floating()}
			want := []any{tt.kind, tt.path, tt.digest, tt.tag, tt.floating}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ParseSource(%q) (-want +got):\n%s", tt.src, diff)
			}
		})
	}
}

func TestResolveRegistry(t *testing.T) {
	t.Parallel()
	host := newRegistry(t)
	single := platformImage(t, "linux", "amd64")
	singleDigest := push(t, host+"/single:v1", single)
	idx, digests := multiIndex(t)
	idxDigest := pushIndex(t, host+"/multi:v1", idx)
	arm := platformImage(t, "linux", "arm64")
	push(t, host+"/armonly:v1", arm)
	armIdx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	pushIndex(t, host+"/armindex:v1", armIdx)

	tests := []struct {
		name    string
		src     string
		opts    []Option
		want    Resolved
		wantErr string
		notFnd  bool
	}{
		{name: "single manifest by tag", src: host + "/single:v1",
			want: Resolved{ManifestDigest: singleDigest.String(), Platform: "linux/amd64"}},
		{name: "single manifest by digest", src: host + "/single@" + singleDigest.String(),
			want: Resolved{ManifestDigest: singleDigest.String(), Platform: "linux/amd64"}},
		{name: "index picks linux/amd64", src: host + "/multi:v1",
			want: Resolved{IndexDigest: idxDigest.String(), ManifestDigest: digests["linux/amd64"].String(), Platform: "linux/amd64"}},
		{name: "index pinned by index digest", src: host + "/multi@" + idxDigest.String(),
			want: Resolved{IndexDigest: idxDigest.String(), ManifestDigest: digests["linux/amd64"].String(), Platform: "linux/amd64"}},
		{name: "index for arm64", src: host + "/multi:v1", opts: []Option{WithPlatform("linux/arm64")},
			want: Resolved{IndexDigest: idxDigest.String(), ManifestDigest: digests["linux/arm64/v8"].String(), Platform: "linux/arm64"}},
		{name: "unknown tag", src: host + "/single:nope", wantErr: "is not served by", notFnd: true},
		{name: "unknown repo", src: host + "/nothing:v1", wantErr: "is not served by", notFnd: true},
		{name: "digest not served", src: host + "/single@sha256:" + strings.Repeat("ab", 32), wantErr: "is not served by", notFnd: true},
		{name: "index without amd64", src: host + "/armindex:v1", wantErr: "no linux/amd64 image in the index (it has linux/arm64)", notFnd: true},
		{name: "single manifest of another platform", src: host + "/armonly:v1", wantErr: "image is for linux/arm64, not linux/amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(t.Context(), tt.src, append([]Option{WithClock(clock)}, tt.opts...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve err = %v, want %q", err, tt.wantErr)
				}
				if errors.Is(err, ErrNotFound) != tt.notFnd {
					t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", !tt.notFnd, tt.notFnd)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Reference, tt.want.ResolvedAt = tt.src, fixedNow
			got.ConfigDigest, got.Source = "", Source{}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPullThenExtractFromRegistry(t *testing.T) {
	t.Parallel()
	host := newRegistry(t)
	idx, digests := multiIndex(t)
	pushIndex(t, host+"/multi:v1", idx)
	img, res, err := Pull(t.Context(), host+"/multi:v1")
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/multi@" + digests["linux/amd64"].String(); res.Pinned().String() != want {
		t.Errorf("Pinned() = %s, want %s", res.Pinned(), want)
	}
	// The pinned form resolves to the same manifest.
	again, err := Resolve(t.Context(), res.Pinned().String())
	if err != nil || again.ManifestDigest != res.ManifestDigest {
		t.Fatalf("Resolve(Pinned()) = %+v, %v", again, err)
	}
	rootfs, err := Extract(t.Context(), img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(rootfs, "platform")); err != nil || string(b) != "linux/amd64" {
		t.Errorf("extracted /platform = %q, %v; want linux/amd64", b, err)
	}
	if filepath.Base(rootfs) != strings.TrimPrefix(res.ConfigDigest, "sha256:") {
		t.Errorf("rootfs %s is not keyed by the config digest %s", rootfs, res.ConfigDigest)
	}
}

func TestResolveOCILayout(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	idx, digests := multiIndex(t)
	idxDigest, _ := idx.Digest()
	// A layout whose index.json lists the multi-platform index.
	if _, err := layout.Write(filepath.Join(base, "multi"), mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: idx})); err != nil {
		t.Fatal(err)
	}
	// A layout listing two single images with no platform: ambiguous.
	a, b := platformImage(t, "linux", "amd64"), imageOf(t, layerOf(t, file("b", "b")))
	ad, _ := a.Digest()
	if _, err := layout.Write(filepath.Join(base, "two"), mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: a}, mutate.IndexAddendum{Add: b})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		src     string
		want    Resolved
		wantErr string
	}{
		{name: "index in layout", src: "oci-layout:multi",
			want: Resolved{IndexDigest: idxDigest.String(), ManifestDigest: digests["linux/amd64"].String()}},
		{name: "manifest digest inside the index", src: "oci-layout:multi@" + digests["linux/amd64"].String(),
			want: Resolved{ManifestDigest: digests["linux/amd64"].String()}},
		{name: "index digest", src: "oci-layout:" + filepath.Join(base, "multi") + "@" + idxDigest.String(),
			want: Resolved{IndexDigest: idxDigest.String(), ManifestDigest: digests["linux/amd64"].String()}},
		{name: "pinned image among two", src: "oci-layout:two@" + ad.String(), want: Resolved{ManifestDigest: ad.String()}},
		{name: "ambiguous", src: "oci-layout:two", wantErr: "holds 2 images"},
		{name: "digest not in layout", src: "oci-layout:multi@sha256:" + strings.Repeat("cd", 32), wantErr: "holds no manifest or index"},
		{name: "not a layout", src: "oci-layout:nowhere", wantErr: "is not an OCI image layout (no index.json)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(t.Context(), tt.src, WithBaseDir(base), WithClock(clock))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Reference, tt.want.ResolvedAt, tt.want.Platform = tt.src, fixedNow, "linux/amd64"
			got.ConfigDigest, got.Source = "", Source{}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveOCILayoutCorruptBlob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := platformImage(t, "linux", "amd64")
	d, _ := img.Digest()
	if _, err := layout.Write(dir, mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img})); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, "blobs", "sha256", d.Hex)
	raw, _ := os.ReadFile(blob)
	if err := os.WriteFile(blob, append(raw, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(t.Context(), "oci-layout:"+dir); err == nil || !strings.Contains(err.Error(), "is corrupt") {
		t.Fatalf("Resolve err = %v, want a corrupt blob", err)
	}
}

func TestPullDockerArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := platformImage(t, "linux", "amd64")
	tag, _ := name.NewTag("example.com/cuda:dev")
	if err := tarball.WriteToFile(filepath.Join(dir, "img.tar"), tag, img); err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigName()
	got, res, err := Pull(t.Context(), "docker-archive:img.tar", WithBaseDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if res.ManifestDigest != cfg.String() || res.ConfigDigest != cfg.String() || res.IndexDigest != "" {
		t.Errorf("Resolved = %+v, want manifest and config digest %s", res, cfg)
	}
	if want := "docker-archive:img.tar@" + cfg.String(); res.Pinned().String() != want {
		t.Errorf("Pinned() = %s, want %s", res.Pinned(), want)
	}
	if _, err := Resolve(t.Context(), res.Pinned().String(), WithBaseDir(dir)); err != nil {
		t.Errorf("Resolve(Pinned()): %v", err)
	}
	rootfs, err := Extract(t.Context(), got, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "platform")); string(b) != "linux/amd64" {
		t.Errorf("extracted /platform = %q", b)
	}
	wrong := "docker-archive:img.tar@sha256:" + strings.Repeat("ef", 32)
	if _, err := Resolve(t.Context(), wrong, WithBaseDir(dir)); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "the file changed since it was pinned") {
		t.Errorf("Resolve(%s) err = %v, want ErrNotFound with a hint", wrong, err)
	}
	if _, err := Resolve(t.Context(), "docker-archive:missing.tar", WithBaseDir(dir)); err == nil || !strings.Contains(err.Error(), "docker save") {
		t.Errorf("missing archive err = %v, want a hint about docker save", err)
	}
}

func TestResolveUnreachableRegistry(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	start := time.Now()
	_, err = Resolve(t.Context(), addr+"/cuda:12")
	if err == nil || !strings.Contains(err.Error(), "hint: is the registry "+addr+" reachable from here?") {
		t.Fatalf("Resolve err = %v, want the reachability hint", err)
	}
	t.Logf("failed after %v: %v", time.Since(start), err)
}
