// Package tinyimage builds, for tests, a tiny container image: this
// machine's dash as /bin/sh with the shared libraries it loads. That is
// enough for runner and sandbox tests to run shell steps inside a real
// image, without a registry or the CUDA test image.
package tinyimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// Image returns the image: /bin/sh (dash), the libraries ldd lists for
// it at their paths, empty /tmp, /proc and /dev, and PATH=/bin. When dash
// or ldd is missing the test fails in CI and is skipped elsewhere.
func Image(t testing.TB) v1.Image {
	t.Helper()
	shell := testenv.RequireTool(t, "dash")
	testenv.RequireTool(t, "ldd")
	out, err := exec.Command("ldd", shell).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", shell, err)
	}
	files := map[string]string{"bin/sh": shell} // image path -> host path
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if strings.HasPrefix(f, "/") {
				files[strings.TrimPrefix(f, "/")] = f
			}
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{"tmp": true, "proc": true, "dev": true}
	for p := range files {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	names = names[:0]
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		b, err := os.ReadFile(files[p]) // follows the host's symlinks
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o755, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		OS: "linux", Architecture: runtime.GOARCH,
		Config: v1.Config{Env: []string{"PATH=/bin"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// WriteDockerArchive writes Image as a `docker save` tarball at path (what
// a pipeline names as docker-archive:PATH) and returns its config digest.
func WriteDockerArchive(t testing.TB, path string) string {
	t.Helper()
	img := Image(t)
	tag, err := name.NewTag("gpuattest.test/tiny:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
