package kernels_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// The harness declares the driver API itself (harness/cuda_api.h) and
// resolves it with dlsym; a wrong parameter type would only show on a GPU.
// This compiles every symbol the harness looks up, by the name it looks
// it up under, against the real cuda.h: each member of cu::Api must have
// that function's type (with cuda.h's enum and handle types mapped to the
// harness's), and the constants must agree.
func TestCUDAAPIMatchesCudaH(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "g++")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "g++", "-x", "c++", "-E", "-", "-o", os.DevNull).CombinedOutput(); err != nil {
		t.Fatalf("g++ -E: %v\n%s", err, out)
	}
	probe := exec.CommandContext(ctx, "g++", "-x", "c++", "-fsyntax-only", "-")
	probe.Stdin = strings.NewReader("#include <cuda.h>\n")
	if out, err := probe.CombinedOutput(); err != nil {
		testenv.Missing(t, "cuda.h not on the include path (it comes with nvcc): "+firstLine(string(out)))
	}
	src, err := os.ReadFile("harness/harness.cc")
	if err != nil {
		t.Fatal(err)
	}
	syms := regexp.MustCompile(`sym\(api\.(\w+), "(\w+)"`).FindAllStringSubmatch(string(src), -1)
	if len(syms) < 30 {
		t.Fatalf("found %d dlsym lookups in harness.cc; the pattern no longer matches", len(syms))
	}
	var b strings.Builder
	b.WriteString(`#include <cuda.h>
#include <type_traits>
#include "harness/cuda_api.h"

// M maps a cuda.h type to the harness's: enums (CUresult, attributes)
// to int, handle structs to cu::'s, through pointers and const.
template <class T> struct M { using type = std::conditional_t<std::is_enum_v<T>, int, T>; };
template <class T> struct M<T*> { using type = typename M<T>::type*; };
template <class T> struct M<const T> { using type = const typename M<T>::type; };
#define HANDLE(h) template <> struct M<std::remove_pointer_t<h>> { using type = std::remove_pointer_t<cu::h>; };
HANDLE(CUcontext)
HANDLE(CUmodule)
HANDLE(CUfunction)
HANDLE(CUstream)
HANDLE(CUevent)
HANDLE(CUgraph)
HANDLE(CUgraphExec)
template <> struct M<CUuuid> { using type = cu::CUuuid; };
template <class R, class... A> struct M<R (*)(A...)> { using type = typename M<R>::type (*)(typename M<A>::type...); };

static_assert(std::is_same_v<cu::CUdevice, CUdevice>);
static_assert(std::is_same_v<cu::CUdeviceptr, CUdeviceptr>);
static_assert(sizeof(cu::CUuuid) == sizeof(CUuuid));
static_assert(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(cu::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
static_assert(cu::CU_EVENT_DEFAULT == CU_EVENT_DEFAULT);
static_assert(cu::CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING);
static_assert(cu::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(cu::CU_EVENT_BLOCKING_SYNC == CU_EVENT_BLOCKING_SYNC);
static_assert(cu::CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING);
`)
	for _, m := range syms {
		fmt.Fprintf(&b, "static_assert(std::is_same_v<decltype(cu::Api::%s), M<decltype(&::%s)>::type>, \"cu::Api::%s does not have %s's type\");\n", m[1], m[2], m[1], m[2])
	}
	dir := t.TempDir()
	check := filepath.Join(dir, "check.cc")
	if err := os.WriteFile(check, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "g++", "-std=c++17", "-fsyntax-only", "-I.", check).CombinedOutput(); err != nil {
		t.Errorf("harness/cuda_api.h disagrees with cuda.h:\n%s", out)
	}
}

// The sustained mode's checksum, burn and sweep kernels are embedded as
// PTX (harness/checksum_ptx.h from harness/checksum.cu, and the
// tensor-core burn's harness/burn_mma_ptx.h from harness/burn_mma.cu).
// Each header must come from its source as it is now, and ptxas must
// assemble it for the pipelines' targets.
func TestChecksumPTX(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, header, entry string }{
		{"checksum.cu", "checksum_ptx.h", "gpuattest_checksum"},
		{"burn_mma.cu", "burn_mma_ptx.h", "gpuattest_burn_mma"},
	} {
		src, err := os.ReadFile("harness/" + tc.src)
		if err != nil {
			t.Fatal(err)
		}
		hdr, err := os.ReadFile("harness/" + tc.header)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(src)
		if !strings.Contains(string(hdr), tc.src+" sha256: "+hex.EncodeToString(sum[:])) {
			t.Errorf("harness/%s is stale: regenerate it with make -C kernels checksum-ptx", tc.header)
		}
		_, rest, ok := strings.Cut(string(hdr), `R"PTX(`)
		ptx, _, ok2 := strings.Cut(rest, `)PTX"`)
		if !ok || !ok2 || !strings.Contains(ptx, ".entry "+tc.entry+"(") {
			t.Fatalf("no %s PTX in harness/%s", tc.entry, tc.header)
		}
		testenv.RequireTool(t, "ptxas")
		file := filepath.Join(t.TempDir(), tc.header+".ptx")
		if err := os.WriteFile(file, []byte(ptx), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, arch := range []string{"sm_80", "sm_90"} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			out, err := exec.CommandContext(ctx, "ptxas", "-arch="+arch, "-o", os.DevNull, file).CombinedOutput()
			cancel()
			if err != nil {
				t.Errorf("%s: ptxas -arch=%s: %v\n%s", tc.header, arch, err, out)
			}
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// The burn kernels, compiled by nvcc for the pipelines' targets, are what
// they claim: the tensor-core burn's SASS runs HMMA (mma.sync
// m16n8k16, fp32 accumulate), the FFMA burn's runs FFMA, and so does the
// embedded PTX when ptxas assembles it as the driver's JIT would.
func TestBurnKernelsSASS(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "nvcc")
	testenv.RequireTool(t, "cuobjdump")
	testenv.RequireTool(t, "ptxas")
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	ptx := func(header string) string {
		hdr, err := os.ReadFile(header)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(string(hdr), `R"PTX(`)
		body, _, _ := strings.Cut(rest, `)PTX"`)
		f := filepath.Join(dir, filepath.Base(header)+".ptx")
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, arch := range []string{"sm_80", "sm_90"} {
		for _, tc := range []struct {
			src, header, fn, op string
			min                 int
		}{
			{"harness/burn_mma.cu", "harness/burn_mma_ptx.h", "gpuattest_burn_mma", "HMMA.16816.F32", 12},
			{"harness/checksum.cu", "harness/checksum_ptx.h", "gpuattest_burn", "FFMA", 128},
		} {
			cubin := filepath.Join(dir, tc.fn+"-"+arch+".cubin")
			run("nvcc", "-cubin", "-arch="+arch, "-o", cubin, tc.src)
			jit := filepath.Join(dir, tc.fn+"-"+arch+"-jit.cubin")
			run("ptxas", "-arch="+arch, "-o", jit, ptx(tc.header))
			for _, bin := range []string{cubin, jit} {
				sass := run("cuobjdump", "-sass", "-fun", tc.fn, bin)
				if n := strings.Count(sass, tc.op); n < tc.min {
					t.Errorf("%s for %s (%s): %d %s instructions, want at least %d", tc.fn, arch, filepath.Base(bin), n, tc.op, tc.min)
				}
			}
		}
	}
}
