package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuattest/gpuattest/pipeline/image"
)

func ExampleParseSource() {
	for _, src := range []string{"nvidia/cuda:12.4.1-devel-ubuntu22.04", "oci-layout:images/cuda", "docker-archive:cuda.tar"} {
		s, err := image.ParseSource(src)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s.Kind, s.Floating())
	}
	// Output:
	// registry true
	// oci-layout true
	// docker-archive true
}

// ExamplePinned_URI shows how attestations name a pinned image: a
// registry image by repository and digest, an image carried as a file by
// digest alone, never by its path.
func ExamplePinned_URI() {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, src := range []string{"ghcr.io/acme/cuda@" + d, "oci-layout:/home/me/images/cuda@" + d} {
		p, err := image.ParsePinned(src)
		if err != nil {
			fmt.Println(err)
			continue
		}
		p.Name = "cuda"
		fmt.Println(p.URI())
	}
	// Output:
	// oci://ghcr.io/acme/cuda@sha256:abababababababababababababababababababababababababababababababab
	// pkg:oci/cuda@sha256%3Aabababababababababababababababababababababababababababababababab
}

func ExampleCheckLock() {
	images := map[string]string{"cuda": "nvidia/cuda:12.4.1-devel-ubuntu22.04"}
	// No gpuattest.lock: a floating tag is refused (no network needed).
	for _, p := range image.CheckLock(context.Background(), images, nil, image.WithPipelineFile("release.yaml")) {
		fmt.Println(p)
	}
	// Output:
	// image cuda (nvidia/cuda:12.4.1-devel-ubuntu22.04): tag "12.4.1-devel-ubuntu22.04" is not pinned to a digest and there is no gpuattest.lock
	// hint: run `gpuattest lock release.yaml` and commit gpuattest.lock
}

func ExampleExtract() {
	// A one-layer image holding /etc/os-release.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := "ID=example\n"
	_ = tw.WriteHeader(&tar.Header{Name: "etc/os-release", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	_, _ = io.WriteString(tw, body)
	_ = tw.Close()
	layer, _ := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	img, _ := mutate.AppendLayers(empty.Image, layer)

	cache, _ := os.MkdirTemp("", "gpuattest-example-")
	defer os.RemoveAll(cache)
	rootfs, err := image.Extract(context.Background(), img, cache)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(rootfs, "etc", "os-release"))
	fmt.Print(string(b))
	// Output:
	// ID=example
}
