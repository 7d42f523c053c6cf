package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/slurmtest"
)

// fleetPipeline builds once (a fake fatbin and a harness) and runs one
// GPU step on every node.
const fleetPipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: fleet-demo
targets: [sm_80, sm_90]
steps:
  - id: build
    run: mkdir -p out && echo kernel > out/kernels.fatbin && printf '#!/bin/sh\necho harness ok\n' > out/harness && chmod +x out/harness
    outputs: [out/kernels.fatbin, out/harness]
  - id: check
    gpu: true
    needs: [build]
    run: ./out/harness && test "$(cat out/kernels.fatbin)" = kernel
`

// fleetFile is a two-class fleet on the test cluster's one node.
const fleetFile = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: slurm
partition: gpu
sharedDir: %SHARED%
classes:
  - name: a100
    gres: gpu:a100:1
    constraint: sm_80
    targets: [sm_80]
    timeLimit: 5m
  - name: h100
    gres: gpu:h100:1
    constraint: sm_90
    targets: [sm_90]
    timeLimit: 5m
`

// fleetSetup starts a local Slurm and writes the pipeline, the fleet file
// and an owner key; it returns the directory holding them.
func fleetSetup(t *testing.T) string {
	t.Helper()
	c := slurmtest.Start(t, nil)
	t.Setenv("SLURM_CONF", c.Conf)
	t.Setenv("GPUATTEST_FLEET_POLL", "300ms")
	t.Setenv("GPUATTEST_PASSWORD", "")
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	for _, d := range []string{"proj", "shared"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "proj", "p.yaml"), fleetPipeline)
	write(t, filepath.Join(dir, "fleet.yaml"), strings.ReplaceAll(fleetFile, "%SHARED%", shared))
	if code, out := fleetCLI(t, dir, "key", "generate", "--output-key-prefix", "rel", "--no-password"); code != 0 {
		t.Fatalf("key generate: exit %d\n%s", code, out)
	}
	return dir
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fleetCLI runs gpuattest in dir in this process and returns its exit code
// and output.
func fleetCLI(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out bytes.Buffer
	code := execute(args, strings.NewReader(""), &out, &out)
	return code, out.String()
}

// TestFleetTwoClassesEndToEnd runs a two-class fleet against a real
// slurmctld and slurmd: the build runs here once, each class's job runs
// the GPU step on a simulated GPU of its gres type, the node bundles are
// signed by their job keys, and verify names every job. With a node
// bundle removed, verify fails naming the job (exit 12).
func TestFleetTwoClassesEndToEnd(t *testing.T) {
	dir := fleetSetup(t)
	code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("run --fleet: exit %d\n%s", code, out)
	}
	for _, want := range []string{"2 job(s) submitted to slurm cluster gpuattest", "fleet dispatch: PASSED", "a100-0", "h100-0", "node1"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --fleet output lacks %q:\n%s", want, out)
		}
	}
	shared, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "jobs", "*", "job.key"))
	if len(shared) != 0 {
		t.Errorf("job keys left on the shared directory after the jobs ended: %v", shared)
	}
	code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated")
	if code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") {
		t.Fatalf("fleet verify: exit %d\n%s", code, out)
	}
	for _, job := range []string{"a100-0", "h100-0"} {
		if !strings.Contains(out, job) {
			t.Errorf("verify does not list job %s:\n%s", job, out)
		}
	}
	// Simulated GPUs are refused unless allowed.
	if code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub"); code != exitPolicy || !strings.Contains(out, "simulated") {
		t.Errorf("verify without --allow-simulated: exit %d, want %d naming the simulated GPUs\n%s", code, exitPolicy, out)
	}
	if err := os.Remove(filepath.Join(dir, "run", "nodes", "h100-0.intoto.jsonl")); err != nil {
		t.Fatal(err)
	}
	code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated")
	if code != exitPolicy || !strings.Contains(out, "job h100-0 (class h100): missing") {
		t.Errorf("verify with h100-0's bundle removed: exit %d, want %d naming the job\n%s", code, exitPolicy, out)
	}
}
