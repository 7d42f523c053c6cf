package collect_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// whereSuite writes a results file like the harness's: backend $1, the
// device UUID $2 when given, one passed and one failed case when $3 is
// "fail".
const whereSuite = `#!/bin/sh
dev=""
[ -n "$2" ] && dev="\"device\": \"sim\", \"device_uuid\": \"$2\","
second='{"name": "b", "status": "passed"}'
[ "$3" = fail ] && second='{"name": "b", "status": "failed", "message": "wrong"}'
cat > "$GPUATTEST_STEP_DIR/r.json" <<EOF
{"schema": "https://gpuattest.dev/results/v1", "tool": "where-suite", "backend": "$1", $dev
 "cases": [{"name": "a", "status": "passed"}, $second]}
EOF
cp "$GPUATTEST_STEP_DIR/r.json" "$4"
[ "$3" != fail ]
`

const wherePipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: where
targets: [sm_80]
steps:
  - id: named
    kind: test
    gpu: true
    run: [sh, suite.sh, cuda, %s, ok, named.json]
    results: named.json
  - id: visible
    kind: test
    gpu: true
    env: {CUDA_VISIBLE_DEVICES: "1,7,0"}
    run: [sh, suite.sh, cpu, "", ok, visible.json]
    results: visible.json
  - id: all
    kind: test
    gpu: true
    run: [sh, suite.sh, cpu, "", ok, all.json]
    results: all.json
  - id: nogpu
    kind: test
    run: [sh, suite.sh, cpu, "", fail, nogpu.json]
    results: nogpu.json
`

// TestStepsSayWhereTheyRan runs test steps on two simulated A100s and
// checks what the predicate says about each: the GPU the results name by
// UUID; the GPUs CUDA_VISIBLE_DEVICES leaves visible (up to the first
// entry that names none); every GPU when unset; none for a step that is
// not gpu: true; backend, case counts and the failed cases.
func TestStepsSayWhereTheyRan(t *testing.T) {
	src, err := gpu.Simulate("a100:2")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := gpu.Collect(t.Context(), gpu.WithSource(src))
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := rec.GPUs[0], rec.GPUs[1]
	root := t.TempDir()
	write(t, filepath.Join(root, "suite.sh"), whereSuite)
	write(t, filepath.Join(root, "p.yaml"), fmt.Sprintf(wherePipeline, g1.UUID))
	p, err := pipeline.Load(filepath.Join(root, "p.yaml"), pipeline.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := run.Pipeline(t.Context(), p, run.WithOutDir(dir), run.WithoutCache(), run.WithGPUSource(src)); err != nil {
		t.Fatal(err)
	}
	r, err := collect.FromRunDir(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	dev := func(g hardware.GPU) attest.Device {
		return attest.Device{UUID: g.UUID, Name: g.Name, ComputeCapability: "8.0", Simulated: true}
	}
	passed := &attest.CaseCounts{Total: 2, Passed: 2}
	want := []attest.StepVerdict{
		{ID: "named", Kind: "test", Verdict: "passed", Runner: "host", GPU: true, Backend: "cuda", Devices: []attest.Device{dev(g1)}, Cases: passed},
		{ID: "visible", Kind: "test", Verdict: "passed", Runner: "host", GPU: true, Backend: "cpu", Devices: []attest.Device{dev(g1)}, Cases: passed},
		{ID: "all", Kind: "test", Verdict: "passed", Runner: "host", GPU: true, Backend: "cpu", Devices: []attest.Device{dev(g0), dev(g1)}, Cases: passed},
		{ID: "nogpu", Kind: "test", Verdict: "failed", Runner: "host", Backend: "cpu", Devices: []attest.Device{},
			Cases: &attest.CaseCounts{Total: 2, Passed: 1, Failed: 1}, FailedCases: []string{"b"}},
	}
	got := r.Steps
	for i := range got {
		got[i].Reason = ""
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}
