package collect_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// The predicate of a simulated H100 run names the floors applied: a
// burn-in of the real harness (on the fake CUDA driver, SIMULATED) on the
// simulated 2-GPU H100 node records, per GPU, the H100 SXM power and
// tensor floors with their peaks, units and datasheet, named and not
// judged (the simulated GPUs' telemetry is idle and the fake's timing
// the host's). On a node of a model the floors table lacks, each floor
// says "no floor: not judged", and preflight warns; with
// preflight.requireFloors it fails.
func TestPredicateNamesTheFloors(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "g++")
	testenv.RequireTool(t, "nvcc") // the run releases a built kernel: the statement's subject
	root := t.TempDir()
	bin, lib := filepath.Join(root, "gpuattest-harness"), filepath.Join(root, "lib")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	if err := os.MkdirAll(filepath.Join(root, "fatbins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"-O2", "-std=c++17", "-pthread", "-o", bin, "../../kernels/harness/harness.cc", "-ldl"},
		{"-O2", "-std=c++17", "-shared", "-fPIC", "-o", filepath.Join(lib, "libcuda.so.1"), "../../kernels/testdata/fakecuda/fakecuda.cc"},
	} {
		if out, err := exec.CommandContext(ctx, "g++", c...).CombinedOutput(); err != nil {
			t.Fatalf("g++ %v: %v\n%s", c, err, out)
		}
	}
	for name, body := range map[string]string{"fatbins/vector_add.fatbin": "placeholder", "k.cu": "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pipelineFor := func(uuids []string, require bool) string {
		return `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: floors
targets: [sm_90]
preflight:
  requireFloors: ` + map[bool]string{true: "true", false: "false"}[require] + `
steps:
  - id: kernels
    kind: cuda-build
    sources: [k.cu]
  - id: burnin
    kind: burnin
    needs: [kernels]
    gpu: true
    duration: 1500ms
    interval: 100ms
    results: out.json
    env:
      LD_LIBRARY_PATH: ` + lib + `
      FAKE_CUDA_DEVICES: "2"
      FAKE_CUDA_UUIDS: ` + strings.Join(uuids, ",") + `
    run: ` + bin + ` --backend cuda --fatbin-dir fatbins --devices all --kernels vector_add --n 65536 --warmup 0 --burn-ms 2 --out out.json
`
	}
	predicate := func(t *testing.T, name string, require bool) (*attest.ValidationPredicate, *run.Result) {
		src, err := gpu.Simulate("h100:2")
		if err != nil {
			t.Fatal(err)
		}
		if name != "" {
			for i := range 2 {
				src.Device(i).GetNameFunc = func() (string, nvml.Return) { return name, nvml.SUCCESS }
			}
		}
		uuids := []string{src.Device(0).UUID, src.Device(1).UUID}
		file := filepath.Join(root, name+"p.yaml")
		if err := os.WriteFile(file, []byte(pipelineFor(uuids, require)), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.Load(file, pipeline.WithRoot(root))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "run")
		res, err := run.Pipeline(t.Context(), p, run.WithOutDir(dir), run.WithoutCache(), run.WithGPUSource(src))
		if err != nil {
			t.Fatal(err)
		}
		r, err := collect.FromRunDir(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := attest.ValidationStatement(r)
		if err != nil {
			t.Fatal(err)
		}
		var pred attest.ValidationPredicate
		if err := json.Unmarshal(st.Predicate, &pred); err != nil {
			t.Fatal(err)
		}
		return &pred, res
	}

	t.Run("simulated H100", func(t *testing.T) {
		pred, res := predicate(t, "", true)
		if !res.Passed() || !pred.Simulated {
			t.Fatalf("run passed %v, simulated %v; steps %+v", res.Passed(), pred.Simulated, pred.Steps)
		}
		seen := map[string]int{}
		for _, f := range pred.Floors {
			seen[f.Metric]++
			if f.Step != "burnin" || f.Model != "H100 SXM" || f.Verdict != attest.FloorNotJudged || !strings.Contains(f.Note, "SIMULATED") ||
				!(f.Min > 0) || !(f.Peak >= f.Min) || f.Unit == "" || f.Source == "" || !strings.HasPrefix(f.SourceURL, "https://") || f.GPU == "" {
				t.Errorf("floor %+v", f)
			}
		}
		if seen["power_share"] != 2 || seen["tensor_fp16"] != 2 {
			t.Errorf("floors %+v; want the power and tensor floors of both GPUs", pred.Floors)
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		pred, res := predicate(t, "NVIDIA Hypothetical X1", false)
		if !res.Passed() || len(pred.Floors) == 0 {
			t.Fatalf("run passed %v, floors %+v", res.Passed(), pred.Floors)
		}
		for _, f := range pred.Floors {
			if f.Model != "" || f.Verdict != attest.FloorNotJudged || !strings.HasPrefix(f.Note, "no floor: not judged") {
				t.Errorf("floor %+v; want no floor: not judged", f)
			}
		}
		var warned bool
		for _, c := range pred.Preflight {
			warned = warned || c.Check == "floors" && c.Status == "warned" && strings.Contains(c.Message, "no floor: not judged")
		}
		if !warned {
			t.Errorf("preflight %+v; want the floors check warned", pred.Preflight)
		}
	})

	t.Run("unknown model, requireFloors", func(t *testing.T) {
		pred, res := predicate(t, "NVIDIA Hypothetical X1", true)
		if res.Passed() || pred.Result != attest.ResultFailed {
			t.Fatalf("run passed %v, result %s; want failed at preflight", res.Passed(), pred.Result)
		}
		var failed bool
		for _, c := range pred.Preflight {
			failed = failed || c.Check == "floors" && c.Status == "failed" && strings.Contains(c.Message, "requireFloors")
		}
		if !failed {
			t.Errorf("preflight %+v; want the floors check failed naming requireFloors", pred.Preflight)
		}
	})
}
