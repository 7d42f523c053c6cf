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
// ratio (the goal of issue 13 item 14: at most 1.0x), and the same for the
// CPU time each used (gpuattest's threads; tar and its gzip child), which
// a loaded machine disturbs less than wall time. Run from the module
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
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpuattest/gpuattest/internal/cudaimage"
	"github.com/gpuattest/gpuattest/pipeline/image"
)

func main() {
	runs := flag.Int("runs", 5, "rounds (median wall time of each tool)")
	layoutDir := flag.String("layout", "", "OCI image layout holding one image (default: a generated layer)")
	size := flag.String("size", "500MB", "uncompressed size of the generated layer")
	src := flag.String("src", "/usr/include,/usr/share/doc,/usr/lib/x86_64-linux-gnu", "comma-separated directories the generated layer's files come from")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of gpuattest's extractions to this file")
	work := flag.String("work", filepath.Join(os.TempDir(), "gpuattest-bench-unpack"), "where the generated layer is cached and the extractions go")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench/unpack: %v\n", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(context.Background(), *runs, *layoutDir, *size, *src, *work); err != nil {
		fmt.Fprintf(os.Stderr, "bench/unpack: %v\n", err)
		pprof.StopCPUProfile()
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
		img, err = cudaimage.LoadLayout(layoutDir)
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
	var g, t []cost
	for i := range runs {
		gc, err := timeGpuattest(ctx, img, filepath.Join(work, "run-gpuattest"))
		if err != nil {
			return err
		}
		tc, err := timeTar(ctx, blobs, filepath.Join(work, "run-tar"))
		if err != nil {
			return err
		}
		fmt.Printf("round %d: gpuattest %v, tar -xzf %v\n", i+1, gc, tc)
		g, t = append(g, gc), append(t, tc)
	}
	gw, tw := median(g, cost.getWall), median(t, cost.getWall)
	gc, tc := median(g, cost.getCPU), median(t, cost.getCPU)
	fmt.Printf("\n%-52s %10s %10s\n", "extraction (median of "+fmt.Sprint(runs)+")", "wall", "CPU")
	fmt.Printf("%-52s %10v %10v\n", "gpuattest (digests checked, safety checks, syncfs)", gw.Round(time.Millisecond), gc.Round(time.Millisecond))
	fmt.Printf("%-52s %10v %10v\n", "tar -xzf (tar and its gzip)", tw.Round(time.Millisecond), tc.Round(time.Millisecond))
	fmt.Printf("\nratio gpuattest / tar -xzf: wall %.2fx (goal: at most 1.00x), CPU %.2fx\n", float64(gw)/float64(tw), float64(gc)/float64(tc))
	return nil
}

// cost is one extraction's wall time and CPU time (user and system, of
// every thread or child process).
type cost struct{ wall, cpu time.Duration }

func (c cost) getWall() time.Duration { return c.wall }
func (c cost) getCPU() time.Duration  { return c.cpu }

func (c cost) String() string {
	return fmt.Sprintf("%v (CPU %v)", c.wall.Round(time.Millisecond), c.cpu.Round(time.Millisecond))
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

func timeGpuattest(ctx context.Context, img v1.Image, cache string) (cost, error) {
	if err := forceRemoveAll(cache); err != nil {
		return cost{}, err
	}
	cpu, start := selfCPU(), time.Now()
	if _, err := image.Extract(ctx, img, cache); err != nil {
		return cost{}, err
	}
	c := cost{time.Since(start), selfCPU() - cpu}
	return c, forceRemoveAll(cache)
}

func timeTar(ctx context.Context, blobs []string, dir string) (cost, error) {
	if err := forceRemoveAll(dir); err != nil {
		return cost{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cost{}, err
	}
	var c cost
	start := time.Now()
	for _, b := range blobs {
		cmd := exec.CommandContext(ctx, "tar", "-xzf", b, "-C", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return cost{}, fmt.Errorf("tar -xzf %s: %v\n%s", b, err, out)
		}
		// wait4's usage covers tar's own waited-for children: its gzip.
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			c.cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	c.wall = time.Since(start)
	return c, forceRemoveAll(dir)
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

func median(cs []cost, f func(cost) time.Duration) time.Duration {
	var s []time.Duration
	for _, c := range cs {
		s = append(s, f(c))
	}
	slices.Sort(s)
	return s[len(s)/2]
}
