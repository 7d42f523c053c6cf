package run_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
)

// TestCacheCoversHeadersAndHostCompiler: a build whose .cu includes a
// header restores from the cache only while that header is unchanged; a
// header-only change (+= becoming -=) runs nvcc again and yields another
// fatbin, and the provenance lists the header as a source read. A -ccbin
// script in the tree is covered as well: changing it runs nvcc again
// (issue 21, item 3).
func TestCacheCoversHeadersAndHostCompiler(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "nvcc")
	testenv.RequireTool(t, "g++")
	dir := t.TempDir()
	files := map[string]string{
		"p.yaml":   "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: hdr\ntargets: [sm_80]\nsteps:\n  - id: k\n    kind: cuda-build\n    sources: [k.cu]\n    flags: [-ccbin, ./cc.sh]\n",
		"k.cu":     "#include \"inc/op.h\"\n__global__ void k(float *x) { x[threadIdx.x] OP 1.0f; }\n",
		"inc/op.h": "#pragma once\n#define OP +=\n",
		"cc.sh":    "#!/bin/sh\nexec g++ \"$@\"\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	n := 0
	build := func(wantCache string) (fatbin string, sources []string) {
		t.Helper()
		n++
		p, err := pipeline.Load(filepath.Join(dir, "p.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "r")
		res, err := run.Pipeline(t.Context(), p, run.WithOutDir(out), run.WithCacheDir(cache), run.WithGPUSource(noGPU(t)))
		if err != nil {
			t.Fatal(err)
		}
		sr := res.Record.Step("k")
		if !res.Passed() || sr.Cache != wantCache {
			t.Fatalf("build %d: passed %v, cache %s, want %s; notes %q, reason %q", n, res.Passed(), sr.Cache, wantCache, sr.Notes, sr.Reason)
		}
		rd, err := rundir.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		ar, err := collect.FromRun(rd, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ar.Sources {
			sources = append(sources, s.Kind+":"+s.Path)
		}
		return sr.Artifacts[0].SHA256, sources
	}
	first, sources := build("miss")
	for _, want := range []string{"source:k.cu", "read:inc/op.h", "read:cc.sh"} {
		if !slices.Contains(sources, want) {
			t.Errorf("provenance sources %v lack %s", sources, want)
		}
	}
	if !slices.ContainsFunc(sources, func(s string) bool { return strings.HasPrefix(s, "host-read:/usr/include/") }) {
		t.Errorf("provenance sources %v name no system header the host build read", sources)
	}
	if again, _ := build("hit"); again != first {
		t.Fatalf("a cache hit restored another fatbin")
	}
	if err := os.WriteFile(filepath.Join(dir, "inc", "op.h"), []byte("#pragma once\n#define OP -=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, _ := build("miss")
	if changed == first {
		t.Fatalf("the header change left the fatbin as it was: the cached one was restored")
	}
	if err := os.WriteFile(filepath.Join(dir, "cc.sh"), []byte("#!/bin/sh\n# another compiler\nexec g++ \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	build("miss")
	build("hit")
}
