package kernels_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

var (
	buildOnce sync.Once
	harness   string
	buildErr  error
	buildDir  string
)

// buildHarness compiles the harness once per test binary with g++, the
// same command the pipelines use.
func buildHarness(t *testing.T) string {
	t.Helper()
	testenv.RequireTool(t, "g++")
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "gpuattest-harness-")
		if buildErr != nil {
			return
		}
		harness = filepath.Join(buildDir, "gpuattest-harness")
		buildErr = gxx("-pthread", "-o", harness, "harness/harness.cc", "-ldl")
	})
	if buildErr != nil {
		t.Fatalf("building the harness: %v", buildErr)
	}
	return harness
}

// gxx runs g++ with the tests' warning flags and args.
func gxx(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "g++", append([]string{"-O2", "-std=c++17", "-Wall", "-Wextra", "-Werror"}, args...)...).CombinedOutput()
	if err != nil {
		return errors.New(err.Error() + "\n" + string(out))
	}
	return nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{buildDir, fakeDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

type run struct {
	results *suite.Results
	stderr  string
	code    int
}

// runHarness runs the harness with args (small sizes for speed) and env,
// and reads the results file when there is one.
func runHarness(t *testing.T, env []string, args ...string) run {
	t.Helper()
	bin := buildHarness(t)
	out := filepath.Join(t.TempDir(), "results.json")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--out", out, "--n", "65536", "--gemm", "96", "--rows", "64", "--cols", "300"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := run{stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running the harness: %v", err)
	}
	if _, statErr := os.Stat(out); statErr == nil {
		res, err := suite.ReadResults(out)
		if err != nil {
			t.Fatalf("results JSON does not read as gpuattest results: %v\nstderr:\n%s", err, r.stderr)
		}
		r.results = res
	}
	return r
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestCPUBackendPassesAllKernels(t *testing.T) {
	t.Parallel()
	r := runHarness(t, nil, "--backend", "cpu", "--warmup", "1", "--repeats", "3", "--seed", "1,2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res := r.results
	if res.Backend != "cpu" || res.Device != "" || res.Tool != "gpuattest-harness 0.1.0" || res.Schema != suite.ResultsSchemaID {
		t.Errorf("header = %q %q %q %q", res.Schema, res.Tool, res.Backend, res.Device)
	}
	var names []string
	for _, c := range res.Cases {
		names = append(names, c.Name)
		if c.Status != "passed" || c.Message != "" {
			t.Errorf("%s: %s %q", c.Name, c.Status, c.Message)
		}
		if c.Correctness == nil || c.Correctness.MaxAbsError > c.Correctness.Tolerance || c.Correctness.Correlation < 0.999 || c.Correctness.Tolerance <= 0 {
			t.Errorf("%s: correctness %+v", c.Name, c.Correctness)
		}
		if len(c.SamplesNS) != 3 || c.Flops <= 0 || c.Bytes <= 0 || !hex64.MatchString(c.OutputSHA256) {
			t.Errorf("%s: samples %v flops %v bytes %v sha %q", c.Name, c.SamplesNS, c.Flops, c.Bytes, c.OutputSHA256)
		}
		if c.Config["backend"] != "cpu" || c.Config["repeats"] != "3" || c.Config["warmup"] != "1" || c.DeviceMemoryUsedBytes != 0 {
			t.Errorf("%s: config %v, device memory %d", c.Name, c.Config, c.DeviceMemoryUsedBytes)
		}
	}
	want := []string{
		"vector_add/n=65536/seed=1", "vector_add/n=65536/seed=2",
		"reduce_sum/n=65536/seed=1", "reduce_sum/n=65536/seed=2",
		"sgemm/m=96/n=96/k=96/seed=1", "sgemm/m=96/n=96/k=96/seed=2",
		"softmax/rows=64/cols=300/seed=1", "softmax/rows=64/cols=300/seed=2",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.stderr, "backend cpu") {
		t.Errorf("stderr does not say the backend:\n%s", r.stderr)
	}
	// Same seeds, same outputs: burn-in relies on it.
	again := runHarness(t, nil, "--backend", "cpu", "--warmup", "0", "--repeats", "1", "--seed", "1,2")
	for i, c := range again.results.Cases {
		if c.OutputSHA256 != res.Cases[i].OutputSHA256 {
			t.Errorf("%s: output digest changed between runs: %s vs %s", c.Name, res.Cases[i].OutputSHA256, c.OutputSHA256)
		}
	}
	if res.Cases[0].OutputSHA256 == res.Cases[1].OutputSHA256 {
		t.Errorf("seeds 1 and 2 gave the same vector_add output")
	}
}

func TestEnvKnobsAndFlagPrecedence(t *testing.T) {
	t.Parallel()
	env := []string{"GPUATTEST_WARMUP=0", "GPUATTEST_REPEATS=2", "GPUATTEST_SEED=7"}
	r := runHarness(t, env, "--backend", "cpu", "--kernels", "vector_add,softmax")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if len(r.results.Cases) != 2 || r.results.Cases[0].Name != "vector_add/n=65536/seed=7" || len(r.results.Cases[0].SamplesNS) != 2 || r.results.Cases[0].Config["warmup"] != "0" {
		t.Errorf("env knobs not applied: %+v", r.results.Cases)
	}
	r = runHarness(t, env, "--backend", "cpu", "--kernels", "vector_add", "--repeats", "4", "--seed", "3")
	if c := r.results.Cases[0]; c.Name != "vector_add/n=65536/seed=3" || len(c.SamplesNS) != 4 {
		t.Errorf("flags did not win over env: %s with %d samples", c.Name, len(c.SamplesNS))
	}
}

// The correctness check must be able to fail: a tolerance below the real
// fp32 error, and a corrupted output element, each fail their case (and
// only theirs) and make the harness exit 1.
func TestCorrectnessFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		failing string
		message string
	}{
		{name: "tolerance below fp32 error", args: []string{"--tolerance", "sgemm=1e-12"}, failing: "sgemm", message: "exceeds tolerance 1e-12"},
		{name: "corrupted output", args: []string{"--inject-fault", "softmax"}, failing: "softmax", message: "exceeds tolerance"},
		{name: "corrupted sum", args: []string{"--inject-fault", "reduce_sum"}, failing: "reduce_sum", message: "exceeds tolerance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runHarness(t, nil, append([]string{"--backend", "cpu", "--warmup", "0", "--repeats", "1"}, tt.args...)...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			for _, c := range r.results.Cases {
				if c.Kernel == tt.failing {
					if c.Status != "failed" || !strings.Contains(c.Message, tt.message) || c.Correctness.MaxAbsError <= c.Correctness.Tolerance {
						t.Errorf("%s: %s %q %+v, want failed with %q", c.Name, c.Status, c.Message, c.Correctness, tt.message)
					}
				} else if c.Status != "passed" {
					t.Errorf("%s: %s %q, want passed", c.Name, c.Status, c.Message)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--backend", "tpu"}, {"--kernels", "conv2d"}, {"--repeats", "0"}, {"--tolerance", "sgemm"}, {"--bogus"}} {
		r := runHarness(t, nil, args...)
		if r.code != 2 || r.results != nil || !strings.Contains(r.stderr, "hint:") {
			t.Errorf("%v: exit %d, results written %v, stderr %q; want exit 2 with a hint and no results", args, r.code, r.results != nil, r.stderr)
		}
	}
}

// TestCUDABackend runs the kernels from real fatbins through the driver
// API. Without a GPU the harness must refuse --backend cuda (exit 3, no
// results) and auto must say cpu; with one, the cases must pass on cuda.
func TestCUDABackend(t *testing.T) {
	t.Parallel()
	// Probe first: without a usable device the harness refuses before it
	// reads any fatbin, so no nvcc build is needed to test that.
	probe := runHarness(t, nil, "--backend", "cuda", "--fatbin-dir", t.TempDir(), "--kernels", "vector_add", "--repeats", "1")
	if probe.code == 3 {
		if probe.results != nil || !strings.Contains(probe.stderr, "backend cuda unavailable") {
			t.Errorf("cuda unavailable but results written or no reason: %q", probe.stderr)
		}
		auto := runHarness(t, nil, "--kernels", "vector_add", "--repeats", "1")
		if auto.code != 0 || auto.results.Backend != "cpu" || auto.results.Device != "" || !strings.Contains(auto.stderr, "running the CPU backend") {
			t.Errorf("auto without a GPU: exit %d, results %+v, stderr %q", auto.code, auto.results, auto.stderr)
		}
		t.Skipf("no usable GPU: %s", strings.TrimSpace(probe.stderr))
	}
	testenv.RequireTool(t, "nvcc")
	dir := t.TempDir()
	for _, k := range []string{"vector_add", "reduce_sum", "sgemm", "softmax"} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		out, err := exec.CommandContext(ctx, "nvcc", "-fatbin",
			"-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_90,code=compute_90",
			"-o", filepath.Join(dir, k+".fatbin"), k+".cu").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("nvcc %s: %v\n%s", k, err, out)
		}
	}
	r := runHarness(t, nil, "--backend", "cuda", "--fatbin-dir", dir, "--repeats", "5")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if r.results.Backend != "cuda" || r.results.Device == "" {
		t.Errorf("backend %q device %q", r.results.Backend, r.results.Device)
	}
	for _, c := range r.results.Cases {
		if c.Status != "passed" || len(c.SamplesNS) != 5 || !hex64.MatchString(c.Config["module_sha256"]) || c.DeviceMemoryUsedBytes <= 0 {
			t.Errorf("%s: %s %q samples %d module %q mem %d", c.Name, c.Status, c.Message, len(c.SamplesNS), c.Config["module_sha256"], c.DeviceMemoryUsedBytes)
		}
	}
	// A missing module is an error case, not a crash or a pass.
	miss := runHarness(t, nil, "--backend", "cuda", "--fatbin-dir", t.TempDir(), "--kernels", "sgemm", "--repeats", "1")
	if miss.code != 1 || miss.results.Cases[0].Status != "error" || !strings.Contains(miss.results.Cases[0].Message, "cannot read") {
		t.Errorf("missing fatbin: exit %d, %+v", miss.code, miss.results)
	}
}

// TestAdaptiveRepeats runs the harness with repeats auto: each case stops
// for a reason it reports, and gpuattest's own check of the samples
// (stats.MedianPrecision, the rule the benchmark step re-applies) agrees
// with the harness wherever it claims the precision was reached.
func TestAdaptiveRepeats(t *testing.T) {
	t.Parallel()
	env := []string{"GPUATTEST_REPEATS=auto", "GPUATTEST_PRECISION=0.05", "GPUATTEST_MAX_TIME=30", "GPUATTEST_WARMUP=1"}
	r := runHarness(t, env, "--backend", "cpu", "--no-flush")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range r.results.Cases {
		if c.Stop == nil || c.Stop.Reason != suite.StopPrecision || c.Stop.ElapsedSeconds <= 0 {
			t.Errorf("%s: stop %+v, want precision", c.Name, c.Stop)
			continue
		}
		if p := stats.MedianPrecision(c.SamplesNS); p > 0.05 || len(c.SamplesNS) < stats.MinSamples {
			t.Errorf("%s: %d samples give ±%.3g, not within the ±5%% the harness claims", c.Name, len(c.SamplesNS), p)
		}
		if c.Config["repeats"] != "auto" || c.Config["precision"] != "0.05" {
			t.Errorf("%s: config %v", c.Name, c.Config)
		}
	}
	// An unreachable precision stops at the time limit, or at the cap on
	// samples, and says which.
	r = runHarness(t, nil, "--backend", "cpu", "--kernels", "vector_add", "--repeats", "auto", "--precision", "1e-12", "--max-time", "0.3")
	if c := r.results.Cases[0]; r.code != 0 || c.Stop == nil || c.Stop.Reason != suite.StopMaxTime || c.Stop.ElapsedSeconds < 0.3 {
		t.Errorf("max time: exit %d, stop %+v", r.code, c.Stop)
	}
	r = runHarness(t, nil, "--backend", "cpu", "--kernels", "sgemm", "--repeats", "auto", "--precision", "1e-12", "--max-samples", "12")
	if c := r.results.Cases[0]; r.code != 0 || c.Stop == nil || c.Stop.Reason != suite.StopMaxSamples || len(c.SamplesNS) != 12 {
		t.Errorf("max samples: exit %d, stop %+v, %d samples", r.code, c.Stop, len(c.SamplesNS))
	}
	// A fixed count reports no stop.
	r = runHarness(t, nil, "--backend", "cpu", "--kernels", "sgemm", "--repeats", "4")
	if c := r.results.Cases[0]; c.Stop != nil || len(c.SamplesNS) != 4 {
		t.Errorf("fixed repeats: stop %+v, %d samples", c.Stop, len(c.SamplesNS))
	}
	for _, args := range [][]string{{"--precision", "0"}, {"--precision", "1.5"}, {"--max-time", "-1"}, {"--repeats", "often"}} {
		if r := runHarness(t, nil, append([]string{"--backend", "cpu"}, args...)...); r.code != 2 || !strings.Contains(r.stderr, "hint:") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}
