// Command unpack benchmarks gpuattest's image extraction
// (pipeline/image.Extract: digest verification, the safety checks, the
// final syncfs) against GNU tar -xzf of the same gzip layers, in one run.
//
// The layers come from an OCI image layout (-layout DIR, for example the
// CUDA test image that .ci/cudaimage caches under
// /var/cache/gpuattest-test/cuda-build-*) or, without -layout, from one
// generated gzip layer of about -size bytes of real files read from -src
// (directories under /usr by default), cached in -work between runs.
//
// Each of -runs rounds extracts the image once with gpuattest (a fresh
// cache directory, in process) and once with `tar -xzf LAYER -C DIR` per
// layer, alternating, and prints the median wall time of each and the
// ratio (the goal of issue 13 item 14: at most 1.0x). Run from the module
// root:
//
//	go run ./bench/unpack [-runs 5] [-layout DIR] [-size 500MB] [-work DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/gpuattest/gpuattest/pipeline/image"
)

func main() {
	runs := flag.Int("runs", 5, "rounds (median wall time of each tool)")
	layoutDir := flag.String("layout", "", "OCI image layout holding one image (default: a generated layer)")
	size := flag.String("size", "500MB", "uncompressed size of the generated layer")
	src := flag.String("src", "/usr/include,/usr/share/doc,/usr/lib/x86_64-linux-gnu", "comma-separated directories the generated layer's files come from")
	work := flag.String("work", filepath.Join(os.TempDir(), "gpuattest-bench-unpack"), "where the generated layer is cached and the extractions go")
	flag.Parse()
	if err := run(context.Background(), *runs, *layoutDir, *size, *src, *work); err != nil {
		fmt.Fprintf(os.Stderr, "bench/unpack: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, runs int, layoutDir, size, src, work string) error {
	if _, err := exec.LookPath("tar"); err != nil {
		return errors.New("GNU tar not found in PATH")
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	var img v1.Image
	var what string
	var err error
	if layoutDir != "" {
		img, err = imageFromLayout(layoutDir)
		what = "image layout " + layoutDir
	} else {
		var n int64
		if n, err = parseSize(size); err != nil {
			return err
		}
		img, what, err = generatedImage(work, strings.Split(src, ","), n)
	}
	if err != nil {
		return err
	}
	blobs, stats, err := layerBlobs(img, work)
	if err != nil {
		return err
	}
	fmt.Printf("gpuattest image extraction vs GNU tar -xzf: %s\n%s\n", what, stats)
	var g, t []time.Duration
	for i := range runs {
		gd, err := timeGpuattest(ctx, img, filepath.Join(work, "run-gpuattest"))
		if err != nil {
			return err
		}
		td, err := timeTar(ctx, blobs, filepath.Join(work, "run-tar"))
		if err != nil {
			return err
		}
		fmt.Printf("round %d: gpuattest %v, tar -xzf %v\n", i+1, gd.Round(time.Millisecond), td.Round(time.Millisecond))
		g, t = append(g, gd), append(t, td)
	}
	gm, tm := median(g), median(t)
	fmt.Printf("\n%-44s %10s\n", "extraction (median of "+fmt.Sprint(runs)+")", "wall")
	fmt.Printf("%-44s %10v\n", "gpuattest (digests checked, safety checks, syncfs)", gm.Round(time.Millisecond))
	fmt.Printf("%-44s %10v\n", "tar -xzf", tm.Round(time.Millisecond))
	fmt.Printf("\nratio gpuattest / tar -xzf: %.2fx (goal: at most 1.00x)\n", float64(gm)/float64(tm))
	return nil
}

func imageFromLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("layout %s holds %d manifests, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// layerBlobs writes each layer's compressed blob into work (tar reads
// files) unless it is a file there already, and describes the layers.
func layerBlobs(img v1.Image, work string) ([]string, string, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, "", err
	}
	var paths []string
	var comp int64
	for i, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, "", err
		}
		p := filepath.Join(work, "blob-"+d.Hex+".tar.gz")
		if _, err := os.Stat(p); err != nil {
			if err := writeBlob(l, p); err != nil {
				return nil, "", fmt.Errorf("layer %d: %w", i, err)
			}
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, "", err
		}
		comp += fi.Size()
		paths = append(paths, p)
	}
	return paths, fmt.Sprintf("%d layer(s), %.1f MB compressed", len(layers), float64(comp)/1e6), nil
}

func timeGpuattest(ctx context.Context, img v1.Image, cache string) (time.Duration, error) {
	if err := forceRemoveAll(cache); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := image.Extract(ctx, img, cache); err != nil {
		return 0, err
	}
	d := time.Since(start)
	return d, forceRemoveAll(cache)
}

func timeTar(ctx context.Context, blobs []string, dir string) (time.Duration, error) {
	if err := forceRemoveAll(dir); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	start := time.Now()
	for _, b := range blobs {
		if out, err := exec.CommandContext(ctx, "tar", "-xzf", b, "-C", dir).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("tar -xzf %s: %v\n%s", b, err, out)
		}
	}
	d := time.Since(start)
	return d, forceRemoveAll(dir)
}

// forceRemoveAll removes p even where extracted directories are read-only.
func forceRemoveAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	if out, err := exec.Command("chmod", "-R", "u+rwx", p).CombinedOutput(); err != nil {
		return fmt.Errorf("chmod -R %s: %v\n%s", p, err, out)
	}
	return os.RemoveAll(p)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
