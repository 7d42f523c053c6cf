package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ent is one crafted tar entry.
type ent struct {
	name     string
	typ      byte
	mode     int64
	body     string
	link     string
	devmajor int64
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, mode: 0o644, body: body} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target}
}
func hardlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, mode: 0o644, link: target}
}

func tarBytes(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body)), Devmajor: e.devmajor, Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("writing tar header %q: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layerOf(t testing.TB, ents ...ent) v1.Layer {
	t.Helper()
	b := tarBytes(t, ents...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: mustCfg(t, img).RootFS})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func mustCfg(t testing.TB, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

// tree describes every entry under dir: "d 0755", "f 0644 content",
// "l target", with hardlinked files sharing an inode marked "=name".
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[rel] = "l " + target
		case fi.IsDir():
			got[rel] = fmt.Sprintf("d %04o", fi.Mode().Perm())
		default:
			b, _ := os.ReadFile(p)
			s := fmt.Sprintf("f %04o %s", fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid), b)
			ino := inode(fi)
			if first, ok := inodes[ino]; ok {
				s += " =" + first
			} else {
				inodes[ino] = rel
			}
			got[rel] = s
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// listAll lists every path under dir (to prove nothing was written where it
// should not be).
func listAll(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func TestExtractLayersWhiteoutsAndModes(t *testing.T) {
	t.Parallel()
	l1 := layerOf(t,
		ent{name: "./", typ: tar.TypeDir, mode: 0o755},
		dir("etc/"),
		file("etc/a", "a1"),
		file("etc/b", "b1"),
		hardlink("etc/a-link", "etc/a"),
		dir("opt/"),
		file("opt/old", "old"),
		dir("opt/sub/"),
		file("opt/sub/deep", "deep"),
		dir("usr/"),
		dir("usr/bin/"),
		ent{name: "usr/bin/tool", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh"},
		symlink("bin", "usr/bin"),
		symlink("abs", "/usr/bin/tool"),
		ent{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		file("ro/f", "ro"),
		dir("was-dir/"),
		file("was-dir/x", "x"),
		file("was-file", "y"),
		ent{name: "fifo", typ: tar.TypeFifo, mode: 0o644},
	)
	l2 := layerOf(t,
		file("etc/.wh.b", ""),
		file("etc/a", "a2"), // replaces a; a-link keeps a1
		dir("opt/"),
		file("opt/new", "new"),
		file("opt/.wh..wh..opq", ""),
		dir("opt/sub/"),
		file("opt/sub/fresh", "fresh"),
		file("bin/tool2", "t2"), // through the in-root symlink bin -> usr/bin
		file("was-dir", "now a file"),
		dir("was-file/"),
		file("ro/g", "g"), // into a read-only directory
		file(".wh.gone", ""),
	)
	img := imageOf(t, l1, l2)
	cache := filepath.Join(t.TempDir(), "cache")
	rootfs, err := Extract(t.Context(), img, cache)
	if err != nil {
		t.Fatal(err)
	}
	cn, _ := img.ConfigName()
	if want := RootfsDir(cache, cn.String()); rootfs != want {
		t.Errorf("rootfs = %s, want %s", rootfs, want)
	}
	want := map[string]string{
		".":             "d 0755",
		"etc":           "d 0755",
		"etc/a":         "f 0644 a2",
		"etc/a-link":    "f 0644 a1",
		"opt":           "d 0755",
		"opt/new":       "f 0644 new",
		"opt/sub":       "d 0755",
		"opt/sub/fresh": "f 0644 fresh",
		"usr":           "d 0755",
		"usr/bin":       "d 0755",
		"usr/bin/tool":  "f 0755 #!/bin/sh",
		"usr/bin/tool2": "f 0644 t2",
		"bin":           "l usr/bin",
		"abs":           "l /usr/bin/tool",
		"ro":            "d 0555",
		"ro/f":          "f 0644 ro",
		"ro/g":          "f 0644 g",
		"was-dir":       "f 0644 now a file",
		"was-file":      "d 0755",
	}
	if diff := cmp.Diff(want, tree(t, rootfs)); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
	// Only the rootfs and the lock file are in the cache: no temporary dir.
	wantCache := []string{".", "rootfs", "rootfs/." + cn.Hex + ".lock", "rootfs/" + cn.Hex}
	var gotCache []string
	for _, p := range listAll(t, cache) {
		if !strings.HasPrefix(p, "rootfs/"+cn.Hex+"/") {
			gotCache = append(gotCache, p)
		}
	}
	if diff := cmp.Diff(wantCache, gotCache); diff != "" {
		t.Errorf("cache contents (-want +got):\n%s", diff)
	}
	// And nothing beside the cache (the absolute symlink was not followed).
	if got := listAll(t, filepath.Dir(cache)); !cmp.Equal(got[:2], []string{".", "cache"}) || len(got) != len(listAll(t, cache))+1 {
		t.Errorf("files beside the cache: %v", got)
	}
}

func TestExtractRefusesUnsafeEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ents    []ent
		wantErr string
		unsafe  bool
	}{
		{name: "dotdot", ents: []ent{file("../x", "evil")}, wantErr: `entry "../x": unsafe layer entry: path has a ".." element`, unsafe: true},
		{name: "dotdot inside", ents: []ent{dir("a/"), file("a/../../x", "evil")}, wantErr: `path has a ".." element`, unsafe: true},
		{name: "absolute", ents: []ent{file("/OUTSIDE/x", "evil")}, wantErr: `/outside/x": unsafe layer entry: absolute path`, unsafe: true},
		{name: "symlink escape then file", ents: []ent{symlink("link", "../../x"), file("link/f", "evil")}, wantErr: `entry "link": unsafe layer entry: symlink target "../../x" leaves the image root`, unsafe: true},
		{name: "nested symlink escape", ents: []ent{dir("d/"), symlink("d/l", "../../x")}, wantErr: `symlink target "../../x" leaves the image root`, unsafe: true},
		{name: "write through absolute symlink", ents: []ent{symlink("l", "OUTSIDE_ABS"), file("l/f", "evil")}, wantErr: `entry "l/f": unsafe layer entry: path resolves through a symlink that leaves the extraction root`, unsafe: true},
		{name: "hardlink escape", ents: []ent{hardlink("h", "../outside/secret")}, wantErr: `entry "h": unsafe layer entry: hardlink target "../outside/secret": path has a ".." element`, unsafe: true},
		{name: "hardlink absolute", ents: []ent{hardlink("h", "/etc/passwd")}, wantErr: `hardlink target "/etc/passwd": absolute path`, unsafe: true},
		{name: "hardlink through symlink", ents: []ent{symlink("l", "OUTSIDE_ABS"), hardlink("h", "l/secret")}, wantErr: `entry "h": unsafe layer entry: path resolves through a symlink that leaves the extraction root`, unsafe: true},
		{name: "char device", ents: []ent{{name: "dev/null", typ: tar.TypeChar, mode: 0o666, devmajor: 1}}, wantErr: `entry "dev/null": unsafe layer entry: device node (1:0)`, unsafe: true},
		{name: "block device", ents: []ent{{name: "sda", typ: tar.TypeBlock, mode: 0o660, devmajor: 8}}, wantErr: `device node (8:0)`, unsafe: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			top := t.TempDir()
			outside := filepath.Join(top, "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			ents := append([]ent(nil), tt.ents...)
			for i := range ents { // point absolute targets at this test's outside dir
				ents[i].link = strings.ReplaceAll(ents[i].link, "OUTSIDE_ABS", outside)
				ents[i].name = strings.ReplaceAll(ents[i].name, "/OUTSIDE", outside)
			}
			// A harmless first layer, so a refusal happens mid-extraction.
			img := imageOf(t, layerOf(t, dir("etc/"), file("etc/ok", "ok")), layerOf(t, ents...))
			cache := filepath.Join(top, "cache")
			_, err := Extract(t.Context(), img, cache)
			if err == nil {
				t.Fatalf("Extract succeeded, want an error containing %q", tt.wantErr)
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q\nwant it to contain %q", err, tt.wantErr)
			}
			if tt.unsafe && !strings.Contains(err.Error(), "\nhint: the image carries an entry that could write outside") {
				t.Errorf("error has no hint: %v", err)
			}
			if got := errors.Is(err, ErrUnsafeEntry); got != tt.unsafe {
				t.Errorf("errors.Is(err, ErrUnsafeEntry) = %v, want %v (err: %v)", got, tt.unsafe, err)
			}
			// Nothing outside the cache changed; the cache holds no rootfs
			// and no temporary directory, only the lock file.
			cn, _ := img.ConfigName()
			want := []string{".", "cache", "cache/rootfs", "cache/rootfs/." + cn.Hex + ".lock", "outside", "outside/secret"}
			if diff := cmp.Diff(want, listAll(t, top)); diff != "" {
				t.Errorf("files after a refused extraction (-want +got):\n%s", diff)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
				t.Errorf("outside/secret changed to %q", b)
			}
		})
	}
}

// failingLayer serves its content, then fails: a crash mid-extraction.
type failingLayer struct {
	v1.Layer
	after int
}

func (f failingLayer) Uncompressed() (io.ReadCloser, error) {
	rc, err := f.Layer.Uncompressed()
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, int64(f.after)), errReader{}), rc}, nil
}

// Compressed serves the stored (gzip) bytes, failing the same way after
// the gzip of the first f.after uncompressed bytes: Extract reads gzip
// layers as stored.
func (f failingLayer) Compressed() (io.ReadCloser, error) {
	rc, err := f.Uncompressed()
	if err != nil {
		return nil, err
	}
	return gzipStream(rc), nil
}

// gzipStream compresses r as it is read; a read error of r ends the
// compressed stream with that error.
func gzipStream(r io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		_, err := io.Copy(zw, r)
		if err == nil {
			err = zw.Close()
		}
		r.Close()
		pw.CloseWithError(err)
	}()
	return pr
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset (simulated)") }

// lyingLayer serves other bytes than its DiffID names.
type lyingLayer struct {
	v1.Layer
	body []byte
}

func (l lyingLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.body)), nil
}

// Compressed serves the gzip of the other bytes.
func (l lyingLayer) Compressed() (io.ReadCloser, error) {
	return gzipStream(io.NopCloser(bytes.NewReader(l.body))), nil
}

func TestExtractInterruptedLeavesNoRootfs(t *testing.T) {
	t.Parallel()
	good := layerOf(t, dir("a/"), file("a/one", strings.Repeat("1", 4096)), file("a/two", strings.Repeat("2", 4096)))
	img := imageOf(t, failingLayer{Layer: good, after: 3000})
	cache := filepath.Join(t.TempDir(), "cache")
	if _, err := Extract(t.Context(), img, cache); err == nil || !strings.Contains(err.Error(), "connection reset (simulated)") {
		t.Fatalf("Extract err = %v, want the simulated read failure", err)
	}
	cn, _ := img.ConfigName()
	if diff := cmp.Diff([]string{".", "rootfs", "rootfs/." + cn.Hex + ".lock"}, listAll(t, cache)); diff != "" {
		t.Errorf("cache after a failed extraction (-want +got):\n%s", diff)
	}
}

func TestExtractIgnoresAndCleansLeftoverTempDir(t *testing.T) {
	t.Parallel()
	img := imageOf(t, layerOf(t, dir("a/"), file("a/one", "1")))
	cache := filepath.Join(t.TempDir(), "cache")
	cn, _ := img.ConfigName()
	// A crashed extraction left a half rootfs with a read-only dir inside.
	left := filepath.Join(cache, "rootfs", ".tmp-"+cn.Hex+"-12345")
	if err := os.MkdirAll(filepath.Join(left, "a", "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "a", "half"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(left, "a", "ro"), 0o500); err != nil {
		t.Fatal(err)
	}
	rootfs, err := Extract(t.Context(), img, cache)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{".": "d 0755", "a": "d 0755", "a/one": "f 0644 1"}
	if diff := cmp.Diff(want, tree(t, rootfs)); diff != "" {
		t.Errorf("rootfs (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftover %s still there (err %v)", left, err)
	}
}

// noLayers fails if its layers are read: a cached Extract must not read them.
type noLayers struct{ v1.Image }

func (noLayers) Layers() ([]v1.Layer, error) { return nil, errors.New("layers read again") }

func TestExtractCachedIsADirectoryCheck(t *testing.T) {
	t.Parallel()
	img := imageOf(t, layerOf(t, file("f", "x")))
	cache := t.TempDir()
	first, err := Extract(t.Context(), img, cache)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Extract(t.Context(), noLayers{img}, cache)
	if err != nil {
		t.Fatalf("cached Extract read the layers again: %v", err)
	}
	if first != second {
		t.Errorf("second Extract = %s, want %s", second, first)
	}
}

func TestExtractConcurrent(t *testing.T) {
	t.Parallel()
	img := imageOf(t, layerOf(t, dir("d/"), file("d/f", strings.Repeat("z", 1<<16))))
	cache := t.TempDir()
	var wg sync.WaitGroup
	got := make([]string, 4)
	errs := make([]error, 4)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = Extract(t.Context(), img, cache) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] {
			t.Errorf("extraction %d: %s, %v; want %s", i, got[i], errs[i], got[0])
		}
	}
}

func TestExtractVerifiesLayerDigest(t *testing.T) {
	t.Parallel()
	l := layerOf(t, file("f", "declared"))
	img := imageOf(t, lyingLayer{Layer: l, body: tarBytes(t, file("f", "swapped"))})
	_, err := Extract(t.Context(), img, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "but the image config says") {
		t.Fatalf("Extract err = %v, want a layer digest mismatch", err)
	}
}

func TestExtractCanceled(t *testing.T) {
	t.Parallel()
	img := imageOf(t, layerOf(t, file("f", "x")))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Extract(ctx, img, t.TempDir()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Extract err = %v, want context.Canceled", err)
	}
}

func TestExtractDirectoryReplacedWithinLayers(t *testing.T) {
	t.Parallel()
	img := imageOf(t,
		layerOf(t, dir("a/"), file("a/x", "x"), dir("d/"), file("d/old", "old"), dir("e/")),
		layerOf(t,
			file(".wh.a", ""), file("a/y", "y"), // whiteout, then the directory comes back
			symlink("d", "e"), file("d/z", "z"), // a directory becomes an in-root symlink
		),
	)
	rootfs, err := Extract(t.Context(), img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{".": "d 0755", "a": "d 0755", "a/y": "f 0644 y", "d": "l e", "e": "d 0755", "e/z": "f 0644 z"}
	if diff := cmp.Diff(want, tree(t, rootfs)); diff != "" {
		t.Errorf("rootfs (-want +got):\n%s", diff)
	}
}
