package cudaimage

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestWriteLayer(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/bin/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Link(filepath.Join(dir, "usr/bin/tool"), filepath.Join(dir, "usr/bin/tool2")))
	must(os.Symlink("usr/bin", filepath.Join(dir, "bin")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))

	layerPath := filepath.Join(t.TempDir(), "layer.tar.gz")
	must(writeLayer(dir, layerPath))
	img, err := imageFromLayer(layerPath)
	must(err)
	rc := mutate.Extract(img)
	defer rc.Close()
	type entry struct {
		Name, Link string
		Type       byte
		Mode       int64
	}
	var got []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(err)
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, epoch)
		}
		got = append(got, entry{h.Name, h.Linkname, h.Typeflag, h.Mode})
	}
	want := []entry{
		{"bin", "usr/bin", tar.TypeSymlink, 0o777},
		{"usr", "", tar.TypeDir, 0o755},
		{"usr/bin", "", tar.TypeDir, 0o755},
		{"usr/bin/tool", "", tar.TypeReg, 0o755},
		{"usr/bin/tool2", "usr/bin/tool", tar.TypeLink, 0o755},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer entries (-want +got):\n%s", diff)
	}
}

func TestRecipeKeyStable(t *testing.T) {
	if _, err := os.Stat("/var/lib/dpkg/status"); err != nil {
		t.Skip("not a Debian system")
	}
	r := Recipe{Version: 1, Suite: "bookworm", HostPackages: []string{"dpkg"}}
	k1, err := r.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := r.Key(context.Background())
	r.Version = 2
	k3, _ := r.Key(context.Background())
	if k1 != k2 || k1 == k3 || !strings.HasPrefix(k1, "cuda-build-") {
		t.Errorf("keys %q %q %q: want the first two equal and the third different", k1, k2, k3)
	}
	r.HostPackages = []string{"no-such-package-gpuattest"}
	if _, err := r.Key(context.Background()); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("missing package: got %v, want a 'not installed' error", err)
	}
}

// TestEnsure builds (or loads) the real CUDA image and checks what is in it.
func TestEnsure(t *testing.T) {
	path, img := Ensure(t)
	d1, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	// A second call is served from the cache, with the same digest.
	l, err := Build(t.Context(), CacheDir(), DefaultRecipe, nil)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := l.Image.Digest()
	if l.Built || l.Path != path || d1 != d2 {
		t.Errorf("second Build: built=%v path=%s digest=%s; want cached %s %s", l.Built, l.Path, d2, path, d1)
	}

	want := map[string]bool{
		"usr/bin/nvcc": false, "usr/bin/ptxas": false, "usr/bin/fatbinary": false,
		"usr/lib/nvidia-cuda-toolkit/bin/cicc": false, "usr/bin/g++-11": false,
		"usr/include/cuda_runtime.h": false, "etc/nvcc.profile": false,
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var size int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		size += h.Size
		if _, ok := want[h.Name]; ok {
			want[h.Name] = true
		}
		if strings.Contains(h.Name, "libcublas") || strings.Contains(h.Name, "libcufft") {
			t.Errorf("image holds math library %s; the recipe excludes them", h.Name)
		}
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
			t.Errorf("image holds device node %s", h.Name)
		}
	}
	for f, ok := range want {
		if !ok {
			t.Errorf("image lacks %s", f)
		}
	}
	t.Logf("image %s: %d MB uncompressed", d1, size>>20)
}
