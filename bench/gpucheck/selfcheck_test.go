package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
)

// selfcheckBundle lays out what the self-check's parts 2 and 3 use of a
// gpu-check bundle: the real selfcheck.sh, the harness and the fake CUDA
// driver built from the repository, placeholder fatbins (the fake driver
// ignores their bytes), and a gpuattest that answers `device -o json`
// with the UUIDs of the simulated node of n H100s.
func selfcheckBundle(t *testing.T, n int) string {
	t.Helper()
	testenv.RequireTool(t, "bash")
	testenv.RequireTool(t, "g++")
	dir := filepath.Join(t.TempDir(), "gpu-check")
	for _, d := range []string{"work/build", "simulated"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	for _, c := range [][]string{
		{"-O2", "-std=c++17", "-pthread", "-o", filepath.Join(dir, "work/build/gpuattest-harness"), "../../kernels/harness/harness.cc", "-ldl"},
		{"-O2", "-std=c++17", "-shared", "-fPIC", "-o", filepath.Join(dir, "simulated/libcuda.so.1"), "../../kernels/testdata/fakecuda/fakecuda.cc"},
	} {
		if out, err := exec.CommandContext(ctx, "g++", c...).CombinedOutput(); err != nil {
			t.Fatalf("g++ %v: %v\n%s", c, err, out)
		}
	}
	sim, err := gpu.Simulate(fmt.Sprintf("h100:%d", n))
	if err != nil {
		t.Fatal(err)
	}
	var device strings.Builder
	for i := range n {
		fmt.Fprintf(&device, `{"index": %d, "uuid": "%s"}\n`, i, sim.Device(i).UUID)
	}
	script, err := os.ReadFile("../../.ci/gpu-check/selfcheck.sh")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"selfcheck.sh": string(script),
		"gpuattest":    "#!/bin/sh\ncat <<'EOF'\n" + device.String() + "EOF\n",
	}
	for _, k := range []string{"vector_add", "reduce_sum", "sgemm", "softmax"} {
		files["work/build/"+k+".fatbin"] = "placeholder"
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The self-check's part 2 on the machine a first run meets, one GPU: the
// corrupted repeat and the flipped bit in the burn are caught and named
// by the device's UUID, and the part passes. Before, a one-device run
// wrote results without a devices list, part 2 found no UUID and failed
// although the harness had caught the corruption. SIMULATED: the fake
// CUDA driver.
func TestSelfcheckPart2OneGPU(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			dir := selfcheckBundle(t, n)
			cmd := exec.Command("bash", filepath.Join(dir, "selfcheck.sh"), "--simulated", "--gpus", fmt.Sprint(n), "--part", "2", "--out", filepath.Join(t.TempDir(), "out"))
			cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH"))
			b, err := cmd.CombinedOutput()
			out := string(b)
			if err != nil || !strings.Contains(out, "SIMULATED SELFCHECK PASS silent-corruption") || !strings.Contains(out, "SIMULATED SELFCHECK PASS burn-corruption") ||
				strings.Contains(out, "SELFCHECK FAIL") || strings.Contains(out, "part 1:") || strings.Contains(out, "part 3:") {
				t.Errorf("selfcheck --gpus %d --part 2: %v\n%s", n, err, out)
			}
		})
	}
}

// Part 1 logs the clock-event reasons as clocks_event_reasons.active,
// which nvidia-smi has from driver R535 on, and as
// clocks_throttle_reasons.active on an older driver that refuses it.
func TestSelfcheckSMIFields(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bash")
	for _, tc := range []struct {
		name   string
		smi    string
		reason string
	}{
		{"R535 and later", "#!/bin/sh\nexit 0\n", "clocks_event_reasons.active"},
		{"before R535", "#!/bin/sh\ncase \"$*\" in *clocks_event_reasons*) echo 'Field \"clocks_event_reasons.active\" is not a valid field to query.' >&2; exit 2;; esac\nexit 0\n", "clocks_throttle_reasons.active"},
	} {
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(tc.smi), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "../../.ci/gpu-check/selfcheck.sh", "--smi-fields")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.Output()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), ","+tc.reason) || !strings.Contains(string(out), "power.draw,power.limit") {
			t.Errorf("%s: %v, fields %q; want them to end with %s", tc.name, err, out, tc.reason)
		}
	}
}
