package cudaimage

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// CacheDir is the directory images are cached in: $GPUATTEST_TEST_CACHE,
// or /var/cache/gpuattest-test.
func CacheDir() string {
	if d := os.Getenv("GPUATTEST_TEST_CACHE"); d != "" {
		return d
	}
	return "/var/cache/gpuattest-test"
}

// Ensure returns the OCI layout path and the image of DefaultRecipe,
// building it on first use (minutes; later calls read the cache). When
// root, debootstrap or the host CUDA packages are missing, the test fails
// in CI and is skipped elsewhere.
func Ensure(t testing.TB) (layoutPath string, img v1.Image) {
	t.Helper()
	testenv.RequireTool(t, "debootstrap")
	testenv.RequireTool(t, "dpkg-query")
	testenv.RequireTool(t, "nvcc")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "building the CUDA image needs root (debootstrap)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if _, err := DefaultRecipe.Key(ctx); err != nil {
		testenv.Missing(t, err.Error())
	}
	l, err := Build(ctx, CacheDir(), DefaultRecipe, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatalf("building the CUDA build image: %v", err)
	}
	if l.Built {
		t.Logf("built CUDA image into %s: %v", l.Path, l.Timings)
	}
	return l.Path, l.Image
}

// StartRegistry starts go-containerregistry's registry on 127.0.0.1,
// keeping blobs on disk under a test temp dir, and returns its host:port.
// It stops when the test ends.
func StartRegistry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(
		registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(t.TempDir())),
	))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Tag is the tag Push gives the image, so tests can resolve (lock) it.
const Tag = "11.8"

// Push pushes img to host (a registry on 127.0.0.1) as
// host/cuda-build:11.8 and returns the digest reference
// host/cuda-build@sha256:....
func Push(t testing.TB, img v1.Image, host string) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewDigest(host+"/cuda-build@"+d.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host+"/cuda-build:"+Tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("pushing the CUDA image to %s: %v", host, err)
	}
	t.Logf("pushed %s in %v", ref, time.Since(start).Round(time.Millisecond))
	return ref.String()
}

// KernelSource is a small CUDA file for build tests.
const KernelSource = `extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void scale(int n, float a, float *y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] *= a;
}
`

// NvccArgs are the nvcc arguments that build src into a fatbin out for
// sm_80 and sm_90. Inside the image the host compiler is named
// explicitly (-ccbin g++-11).
func NvccArgs(src, out string, inImage bool) []string {
	args := []string{"nvcc"}
	if inImage {
		args = append(args, "-ccbin", "g++-11")
	}
	return append(args, "-fatbin",
		"-gencode", "arch=compute_80,code=sm_80",
		"-gencode", "arch=compute_90,code=sm_90",
		"-o", out, src)
}

// HostFatbin writes KernelSource into a temp dir, builds it with the
// host's nvcc and returns the fatbin's bytes.
func HostFatbin(t testing.TB) []byte {
	t.Helper()
	testenv.RequireTool(t, "nvcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "kernel.cu")
	if err := os.WriteFile(src, []byte(KernelSource), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "kernel.fatbin")
	args := NvccArgs(src, out, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("host nvcc: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
