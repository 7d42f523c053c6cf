package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestParsePinned(t *testing.T) {
	t.Parallel()
	h := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name, src string
		want      Pinned
		wantErr   string
	}{
		{name: "registry", src: "ghcr.io/acme/cuda@" + h,
			want: Pinned{Reference: "ghcr.io/acme/cuda@" + h}},
		{name: "layout", src: "oci-layout:/srv/img@" + h,
			want: Pinned{Reference: "oci-layout:/srv/img@" + h}},
		{name: "archive is pinned by its config", src: "docker-archive:img.tar@" + h,
			want: Pinned{Reference: "docker-archive:img.tar@" + h, ConfigDigest: h}},
		{name: "tag", src: "ghcr.io/acme/cuda:12", wantErr: "not pinned by digest"},
		{name: "floating layout", src: "oci-layout:/srv/img", wantErr: "not pinned by digest"},
		{name: "bad digest", src: "x@sha256:abc", wantErr: "not pinned by digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePinned(tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "hint:") {
					t.Fatalf("got %v, want an error with %q and a hint", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.src || got.ManifestDigest() != h {
				t.Errorf("ParsePinned = %s (manifest %s), want %s", got, got.ManifestDigest(), tt.src)
			}
			got.Source = Source{}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParsePinned (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPinnedURINamesNoPath: attestations name an image carried as a file
// by its digest, never by where it lies on this machine.
func TestPinnedURINamesNoPath(t *testing.T) {
	t.Parallel()
	hex := strings.Repeat("cd", 32)
	tests := []struct{ name, src, want string }{
		{"cuda", "127.0.0.1:5000/cuda-build@sha256:" + hex, "oci://127.0.0.1:5000/cuda-build@sha256:" + hex},
		{"cuda", "oci-layout:/home/someone/images/cuda@sha256:" + hex, "pkg:oci/cuda@sha256%3A" + hex},
		{"Tiny Img", "docker-archive:/home/someone/tiny.tar@sha256:" + hex, "pkg:oci/tiny%20img@sha256%3A" + hex},
		{"", "oci-layout:rel/dir@sha256:" + hex, "pkg:oci/image@sha256%3A" + hex},
	}
	for _, tt := range tests {
		p, err := ParsePinned(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		p.Name = tt.name
		if got := p.URI(); got != tt.want {
			t.Errorf("URI of %s = %s, want %s", tt.src, got, tt.want)
		}
	}
	if got := (Pinned{}).URI(); got != "" {
		t.Errorf("URI of no image = %q", got)
	}
}

func TestPinnedJSON(t *testing.T) {
	t.Parallel()
	h := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	p, err := ParsePinned("oci-layout:/srv/img@" + h("1"))
	if err != nil {
		t.Fatal(err)
	}
	p.Name, p.Reference, p.IndexDigest, p.ConfigDigest, p.Platform = "cuda", "oci-layout:img", h("2"), h("3"), "linux/amd64"
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"cuda","reference":"oci-layout:img","pinned":"oci-layout:/srv/img@` + h("1") + `","index_digest":"` + h("2") + `","manifest_digest":"` + h("1") + `","config_digest":"` + h("3") + `","platform":"linux/amd64"}`
	if string(b) != want {
		t.Errorf("JSON:\n%s\nwant\n%s", b, want)
	}
	var back Pinned
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, back, cmp.Comparer(func(a, b name.Reference) bool { return a == b || a.String() == b.String() })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// A record from before the digests were kept still reads.
	var old Pinned
	if err := json.Unmarshal([]byte(`{"name":"cuda","reference":"r:1","pinned":"r@`+h("4")+`"}`), &old); err != nil || old.ManifestDigest() != h("4") {
		t.Errorf("old record: %+v, %v", old, err)
	}
	// A manifest digest that contradicts the pinned source is refused.
	if err := json.Unmarshal([]byte(`{"name":"cuda","pinned":"r@`+h("4")+`","manifest_digest":"`+h("5")+`"}`), &old); err == nil {
		t.Error("a contradicting manifest_digest was accepted")
	}
}

// TestPinnerKeepsTheLockDigests: the pinned image carries the lock's
// index, config and platform, so they reach run.json and provenance.
func TestPinnerKeepsTheLockDigests(t *testing.T) {
	t.Parallel()
	host := newRegistry(t)
	idx, digests := multiIndex(t)
	pushIndex(t, host+"/multi:1", idx)
	idxDigest, _ := idx.Digest()
	images := map[string]string{"m": host + "/multi:1"}
	lock, _, err := LockImages(t.Context(), images, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPinner(t.Context(), images, lock, WithLocked())
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Pin(t.Context(), "m", images["m"])
	if err != nil {
		t.Fatal(err)
	}
	e := mustEntry(t, lock, "m")
	if got.Name != "m" || got.Reference != images["m"] || got.ManifestDigest() != digests["linux/amd64"].String() ||
		got.IndexDigest != idxDigest.String() || got.ConfigDigest != e.ConfigDigest || e.ConfigDigest == "" || got.Platform != "linux/amd64" {
		t.Errorf("Pin = %+v, want the lock entry %+v", got, e)
	}
}

// TestPullPinnedChecksConfig: a source whose config is not the pinned one
// is refused, though it still serves the pinned manifest digest's name.
func TestPullPinnedChecksConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := platformImage(t, "linux", "amd64")
	if err := writeLayout(filepath.Join(dir, "layout"), img); err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(t.Context(), "oci-layout:layout", WithBaseDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	p := r.Pinned().withAbsPath(&options{baseDir: dir})
	if _, _, err := PullPinned(t.Context(), p); err != nil {
		t.Fatalf("PullPinned: %v", err)
	}
	p.ConfigDigest = "sha256:" + strings.Repeat("0", 64)
	if _, _, err := PullPinned(t.Context(), p); err == nil || !strings.Contains(err.Error(), "not the pinned") {
		t.Fatalf("PullPinned with another config digest: %v", err)
	}
	if _, _, err := PullPinned(t.Context(), Pinned{}); err == nil {
		t.Fatal("PullPinned of no image succeeded")
	}
}

// TestWriteDockerArchiveUntagged: the stream docker load reads holds the
// pinned image and no repository or tag, for an oci-layout source and for
// a tagged docker archive.
func TestWriteDockerArchiveUntagged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := platformImage(t, "linux", "amd64")
	cfg, _ := img.ConfigName()
	if err := writeLayout(filepath.Join(dir, "layout"), img); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example.com/victim:latest")
	if err := tarball.WriteToFile(filepath.Join(dir, "img.tar"), tag, img); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"oci-layout:layout", "docker-archive:img.tar"} {
		t.Run(src, func(t *testing.T) {
			r, err := Resolve(t.Context(), src, WithBaseDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			got, err := WriteDockerArchive(t.Context(), r.Pinned(), &buf, WithBaseDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			if got != cfg.String() {
				t.Errorf("config digest %s, want %s", got, cfg)
			}
			opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }
			m, err := tarball.LoadManifest(opener)
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != 1 || len(m[0].RepoTags) != 0 {
				t.Errorf("manifest.json %+v, want one untagged image", m)
			}
			tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				if archiveTagFiles[h.Name] && h.Name != "manifest.json" {
					t.Errorf("the stream holds %s, which tags images on load", h.Name)
				}
			}
			back, err := tarball.Image(opener, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c, _ := back.ConfigName(); c != cfg {
				t.Errorf("image in the stream has config %s, want %s", c, cfg)
			}
			if rootfs, err := Extract(t.Context(), back, t.TempDir()); err != nil {
				t.Error(err)
			} else if b, _ := os.ReadFile(filepath.Join(rootfs, "platform")); string(b) != "linux/amd64" {
				t.Errorf("/platform in the loaded image = %q", b)
			}
		})
	}
	// An archive of two images is refused: it does not say which is meant.
	two := filepath.Join(dir, "two.tar")
	other := mutate.MediaType(empty.Image, "application/vnd.docker.distribution.manifest.v2+json")
	t2, _ := name.NewTag("example.com/other:1")
	if err := tarball.MultiRefWriteToFile(two, map[name.Reference]v1.Image{tag: img, t2: other}); err != nil {
		t.Fatal(err)
	}
	if err := copyArchiveUntagged(two, io.Discard); err == nil || !strings.Contains(err.Error(), "holds 2 images") {
		t.Errorf("copying an archive of two images: %v", err)
	}
}
