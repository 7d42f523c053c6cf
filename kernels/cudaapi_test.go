package kernels_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// cubinsOf reads the cubins a generated header embeds (const unsigned
// char NAME[] = { 0x.., ... };), by array name.
func cubinsOf(t *testing.T, header string) (map[string][]byte, string) {
	t.Helper()
	hdr, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, m := range regexp.MustCompile(`(?s)const unsigned char (\w+)\[\] = \{(.*?)\};`).FindAllStringSubmatch(string(hdr), -1) {
		var b []byte
		for _, tok := range strings.FieldsFunc(m[2], func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
			v, err := strconv.ParseUint(strings.TrimPrefix(tok, "0x"), 16, 8)
			if err != nil {
				t.Fatalf("%s: %s: byte %q: %v", header, m[1], tok, err)
			}
			b = append(b, byte(v))
		}
		out[m[1]] = b
	}
	return out, string(hdr)
}

// The checksum and tensor-core burn kernels are also embedded as cubins
// for sm_80 and sm_90 (harness/checksum_cubin.h, harness/burn_mma_cubin.h),
// which the harness loads without the driver's JIT. Each header must come
// from its source as it is now; with the nvcc it records, rebuilding gives
// the same bytes (nvcc -cubin is reproducible); and cuobjdump must see
// a cubin for that sm holding the source's entry points.
func TestChecksumCubins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, header, name string
		entries           []string
	}{
		{"checksum.cu", "checksum_cubin.h", "kChecksumCubin", []string{"gpuattest_checksum", "gpuattest_burn", "gpuattest_mem_write", "gpuattest_mem_check", "gpuattest_copy"}},
		{"burn_mma.cu", "burn_mma_cubin.h", "kBurnMmaCubin", []string{"gpuattest_burn_mma", "gpuattest_burn_stream_init"}},
	} {
		src, err := os.ReadFile("harness/" + tc.src)
		if err != nil {
			t.Fatal(err)
		}
		cubins, hdr := cubinsOf(t, "harness/"+tc.header)
		sum := sha256.Sum256(src)
		if !strings.Contains(hdr, tc.src+" sha256: "+hex.EncodeToString(sum[:])) {
			t.Errorf("harness/%s is stale: regenerate it with make -C kernels checksum-ptx", tc.header)
		}
		_, recorded, _ := strings.Cut(hdr, "// nvcc: ")
		recorded, _, _ = strings.Cut(recorded, "\n")
		for _, arch := range []string{"80", "90"} {
			name := tc.name + "Sm" + arch
			b := cubins[name]
			if len(b) < 64 || string(b[:4]) != "\x7fELF" || int(b[0x30]) != mustAtoi(t, arch) {
				t.Fatalf("harness/%s: %s is not an sm_%s cubin (%d bytes)", tc.header, name, arch, len(b))
			}
			if _, err := exec.LookPath("cuobjdump"); err != nil {
				continue
			}
			file := filepath.Join(t.TempDir(), name+".cubin")
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			elf := runTool(t, "cuobjdump", "-elf", file)
			if !strings.Contains(elf, "sm="+arch+",") {
				t.Errorf("harness/%s: cuobjdump -elf does not say sm=%s for %s:\n%s", tc.header, arch, name, firstLine(elf))
			}
			syms := runTool(t, "cuobjdump", "-symbols", file)
			for _, e := range tc.entries {
				if !regexp.MustCompile(`STO_ENTRY\s+` + e + `\n`).MatchString(syms) {
					t.Errorf("harness/%s: %s has no entry %s:\n%s", tc.header, name, e, syms)
				}
			}
			if nvcc, err := exec.LookPath("nvcc"); err != nil || !strings.Contains(runTool(t, nvcc, "--version"), recorded) {
				continue // another nvcc builds other bytes: the sha256 line stands for it
			}
			rebuilt := filepath.Join(t.TempDir(), name+".rebuilt.cubin")
			runTool(t, "nvcc", "-cubin", "-arch=sm_"+arch, "-o", rebuilt, "harness/"+tc.src)
			if got, err := os.ReadFile(rebuilt); err != nil || !bytes.Equal(got, b) {
				t.Errorf("harness/%s: %s differs from nvcc -cubin -arch=sm_%s of harness/%s (%v): regenerate it with make -C kernels checksum-ptx", tc.header, name, arch, tc.src, err)
			}
		}
	}
}

// runTool runs a tool and returns its output; failing runs fail the test.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// The burn kernels, compiled by nvcc for the pipelines' targets, are what
// they claim: the tensor-core burn's SASS runs HMMA (mma.sync m16n8k16,
// fp32 accumulate: 8 per round, 16 rounds unrolled, and 4 in the last
// pass), rotates its fragments with SHFL.IDX (two per round) and streams
// 16 bytes per lane from and to memory (LDG.E.128, STG.E.128); the FFMA
// burn's runs FFMA; and so do the embedded cubins and the embedded PTX
// when ptxas assembles it as the driver's JIT would.
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
			src, header, fn string
			min             map[string]int
		}{
			{"harness/burn_mma.cu", "harness/burn_mma_ptx.h", "gpuattest_burn_mma", map[string]int{"HMMA.16816.F32": 132, "SHFL.IDX": 32, "LDG.E.128": 1, "STG.E.128": 1}},
			{"harness/checksum.cu", "harness/checksum_ptx.h", "gpuattest_burn", map[string]int{"FFMA": 128}},
		} {
			cubin := filepath.Join(dir, tc.fn+"-"+arch+".cubin")
			run("nvcc", "-cubin", "-arch="+arch, "-o", cubin, tc.src)
			jit := filepath.Join(dir, tc.fn+"-"+arch+"-jit.cubin")
			run("ptxas", "-arch="+arch, "-o", jit, ptx(tc.header))
			// The cubin the harness embeds for arch (harness/*_cubin.h).
			embeddedHeader := strings.Replace(tc.header, "_ptx.h", "_cubin.h", 1)
			cubins, _ := cubinsOf(t, embeddedHeader)
			name := map[string]string{"harness/burn_mma_cubin.h": "kBurnMmaCubin", "harness/checksum_cubin.h": "kChecksumCubin"}[embeddedHeader] + "Sm" + strings.TrimPrefix(arch, "sm_")
			embedded := filepath.Join(dir, tc.fn+"-"+arch+"-embedded.cubin")
			if err := os.WriteFile(embedded, cubins[name], 0o644); err != nil {
				t.Fatal(err)
			}
			for _, bin := range []string{cubin, jit, embedded} {
				sass := run("cuobjdump", "-sass", "-fun", tc.fn, bin)
				for op, min := range tc.min {
					if n := strings.Count(sass, op+" "); n < min {
						t.Errorf("%s for %s (%s): %d %s instructions, want at least %d", tc.fn, arch, filepath.Base(bin), n, op, min)
					}
				}
			}
		}
	}
}
