package kernels_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// The tests in this file drive the harness's cuda backend through
// testdata/fakecuda: a fake libcuda.so.1 that runs the kernels on the host
// (see its header). They test the harness's host code on the CUDA path
// (driver calls, event timing, batching, context loss, device identity,
// the sustained loop) on machines without a GPU; they prove nothing
// about a GPU, and their names say "FakeDriver".

var (
	fakeOnce sync.Once
	fakeDir  string
	fakeErr  error
)

// fakeDriver builds testdata/fakecuda into a directory as libcuda.so.1,
// once per test binary, with a fatbin directory beside it holding a
// placeholder <kernel>.fatbin per kernel (the fake ignores the bytes).
func fakeDriver(t *testing.T) (libDir, fatbinDir string) {
	t.Helper()
	testenv.RequireTool(t, "g++")
	fakeOnce.Do(func() {
		fakeDir, fakeErr = os.MkdirTemp("", "gpuattest-fakecuda-")
		if fakeErr != nil {
			return
		}
		if fakeErr = gxx("-shared", "-fPIC", "-o", filepath.Join(fakeDir, "libcuda.so.1"), "testdata/fakecuda/fakecuda.cc"); fakeErr != nil {
			return
		}
		if fakeErr = os.Mkdir(filepath.Join(fakeDir, "fatbins"), 0o755); fakeErr != nil {
			return
		}
		for _, k := range []string{"vector_add", "reduce_sum", "sgemm", "softmax"} {
			if fakeErr = os.WriteFile(filepath.Join(fakeDir, "fatbins", k+".fatbin"), []byte("placeholder for "+k), 0o644); fakeErr != nil {
				return
			}
		}
	})
	if fakeErr != nil {
		t.Fatalf("building the fake CUDA driver: %v", fakeErr)
	}
	return fakeDir, filepath.Join(fakeDir, "fatbins")
}

// runFake runs the harness on the cuda backend against the fake driver.
func runFake(t *testing.T, env []string, args ...string) run {
	t.Helper()
	lib, fatbins := fakeDriver(t)
	env = append([]string{"LD_LIBRARY_PATH=" + lib}, env...)
	return runHarness(t, env, append([]string{"--backend", "cuda", "--fatbin-dir", fatbins}, args...)...)
}

// fakeUUID is the UUID the fake driver gives physical device p.
func fakeUUID(p int) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(0x10*(p+1) + i)
	}
	b[0], b[1] = 0xfa, 0xce
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func TestFakeDriverCUDABackend(t *testing.T) {
	t.Parallel()
	r := runFake(t, nil, "--repeats", "4", "--seed", "1,2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res := r.results
	if res.Backend != "cuda" || res.Device != "Fake GPU 0 (gpuattest test driver)" {
		t.Errorf("backend %q device %q", res.Backend, res.Device)
	}
	if res.DeviceUUID != fakeUUID(0) || res.DevicePCIBusID != "0000:18:00.0" || res.DeviceOrdinal == nil || *res.DeviceOrdinal != 0 || res.CUDAVisibleDevices != "" {
		t.Errorf("device identity: uuid %q pci %q ordinal %v visible %q", res.DeviceUUID, res.DevicePCIBusID, res.DeviceOrdinal, res.CUDAVisibleDevices)
	}
	if res.Sustained != nil {
		t.Errorf("a fixed-repeats run reports a sustained block: %+v", res.Sustained)
	}
	cpu := runHarness(t, nil, "--backend", "cpu", "--repeats", "1", "--seed", "1,2")
	for i, c := range res.Cases {
		if c.Status != "passed" || len(c.SamplesNS) != 4 || !hex64.MatchString(c.Config["module_sha256"]) || c.DeviceMemoryUsedBytes <= 0 || c.Config["batch"] == "" {
			t.Errorf("%s: %s %q, %d samples, config %v, device memory %d", c.Name, c.Status, c.Message, len(c.SamplesNS), c.Config, c.DeviceMemoryUsedBytes)
		}
		// The fake computes vector_add exactly as the CPU backend does.
		if c.Kernel == "vector_add" && c.OutputSHA256 != cpu.results.Cases[i].OutputSHA256 {
			t.Errorf("%s: output %s on the fake driver, %s on the cpu backend", c.Name, c.OutputSHA256, cpu.results.Cases[i].OutputSHA256)
		}
	}
	if !strings.Contains(r.stderr, fakeUUID(0)) {
		t.Errorf("stderr does not name the device's UUID:\n%s", r.stderr)
	}
	// A missing module is an error case in a results file that still
	// reads (an errored case has no output digest, not an empty one).
	lib, _ := fakeDriver(t)
	miss := runHarness(t, []string{"LD_LIBRARY_PATH=" + lib}, "--backend", "cuda", "--fatbin-dir", t.TempDir(), "--kernels", "sgemm,softmax", "--repeats", "1")
	if miss.code != 1 || miss.results == nil || len(miss.results.Cases) != 2 {
		t.Fatalf("missing fatbins: exit %d, results %+v\n%s", miss.code, miss.results, miss.stderr)
	}
	for _, c := range miss.results.Cases {
		if c.Status != "error" || !strings.Contains(c.Message, "cannot read") || c.OutputSHA256 != "" {
			t.Errorf("missing fatbin: %s %s %q output %q", c.Name, c.Status, c.Message, c.OutputSHA256)
		}
	}
}

// The harness records which GPU it ran on as the driver numbers it after
// CUDA_VISIBLE_DEVICES (indices or UUIDs): the visible ordinal, the UUID
// and the PCI bus id of the physical device behind it.
func TestFakeDriverVisibleDevices(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, visible, device string
		phys                  int
	}{
		{"index", "2,0", "0", 2},
		{"second visible", "2,0", "1", 0},
		{"uuid", fakeUUID(1)[:12], "0", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runFake(t, []string{"FAKE_CUDA_DEVICES=3", "CUDA_VISIBLE_DEVICES=" + tt.visible}, "--device", tt.device, "--kernels", "vector_add", "--repeats", "1")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			res := r.results
			wantOrdinal := 0
			fmt.Sscan(tt.device, &wantOrdinal)
			if res.DeviceUUID != fakeUUID(tt.phys) || res.DevicePCIBusID != fmt.Sprintf("0000:%02X:00.0", 0x18+0x10*tt.phys) ||
				res.DeviceOrdinal == nil || *res.DeviceOrdinal != wantOrdinal || res.CUDAVisibleDevices != tt.visible ||
				res.Device != fmt.Sprintf("Fake GPU %d (gpuattest test driver)", tt.phys) {
				t.Errorf("device %q uuid %q pci %q ordinal %v visible %q; want physical device %d at ordinal %d",
					res.Device, res.DeviceUUID, res.DevicePCIBusID, res.DeviceOrdinal, res.CUDAVisibleDevices, tt.phys, wantOrdinal)
			}
		})
	}
	t.Run("none visible", func(t *testing.T) {
		t.Parallel()
		r := runFake(t, []string{"FAKE_CUDA_DEVICES=2", "CUDA_VISIBLE_DEVICES="}, "--kernels", "vector_add", "--repeats", "1")
		if r.code != 3 || r.results != nil || !strings.Contains(r.stderr, "CUDA_ERROR_NO_DEVICE") {
			t.Errorf("exit %d, results %v, stderr %q; want exit 3 naming CUDA_ERROR_NO_DEVICE", r.code, r.results != nil, r.stderr)
		}
	})
	t.Run("ordinal beyond the visible", func(t *testing.T) {
		t.Parallel()
		r := runFake(t, []string{"FAKE_CUDA_DEVICES=2", "CUDA_VISIBLE_DEVICES=1"}, "--device", "1", "--kernels", "vector_add", "--repeats", "1")
		if r.code != 3 || !strings.Contains(r.stderr, "only 1 visible") {
			t.Errorf("exit %d, stderr %q; want exit 3: only 1 visible", r.code, r.stderr)
		}
	})
}

// After a sticky error (an illegal address) every CUDA call fails. The
// case that faulted says so; the cases after it are "not run: context
// lost after <case>", not errors blamed on their own kernels.
func TestFakeDriverContextLoss(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		env    []string
		args   []string
		faulty string
	}{
		{"fault in the driver", []string{"FAKE_CUDA_STICKY=sgemm"}, nil, "sgemm"},
		{"fault on the third launch", []string{"FAKE_CUDA_STICKY=reduce_sum:3"}, nil, "reduce_sum"},
		{"injected by the harness", nil, []string{"--inject-illegal-address", "reduce_sum"}, "reduce_sum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runFake(t, tt.env, append([]string{"--repeats", "2"}, tt.args...)...)
			checkContextLoss(t, r, tt.faulty, "CUDA_ERROR_ILLEGAL_ADDRESS", false)
		})
	}
}

// checkContextLoss checks a run over the four kernels in which kernel
// faulty lost the context. The cases before it passed; in a sustained run
// they passed their first repeat, but the loop never ran.
func checkContextLoss(t *testing.T, r run, faulty, why string, sustained bool) {
	t.Helper()
	if r.code != 1 || r.results == nil {
		t.Fatalf("exit %d, results %v; want 1 with results\n%s", r.code, r.results != nil, r.stderr)
	}
	var faultName string
	after := false
	for _, c := range r.results.Cases {
		switch {
		case c.Kernel == faulty:
			faultName = c.Name
			if c.Status != "error" || !strings.Contains(c.Message, why) || !strings.Contains(c.Message, "the context is lost, later cases are not run") {
				t.Errorf("%s: %s %q; want an error naming %s and the lost context", c.Name, c.Status, c.Message, why)
			}
			after = true
		case after:
			if want := "not run: context lost after " + faultName; c.Status != "error" || c.Message != want {
				t.Errorf("%s: %s %q; want error %q", c.Name, c.Status, c.Message, want)
			}
		case sustained:
			if want := "sustained loop not run: context lost after "; c.Status != "error" || !strings.HasPrefix(c.Message, want) {
				t.Errorf("%s: %s %q; want error %q...", c.Name, c.Status, c.Message, want)
			}
		default:
			if c.Status != "passed" {
				t.Errorf("%s: %s %q; want passed (it ran before the fault)", c.Name, c.Status, c.Message)
			}
		}
	}
	if faultName == "" {
		t.Errorf("no case of %s", faulty)
	}
}

// CUDA events resolve about 0.5 us: a microsecond kernel is timed N
// launches per event pair, N chosen so that a sample spans >= 100 us, and
// the sample is the per-launch time.
func TestFakeDriverBatchesMicrosecondKernels(t *testing.T) {
	t.Parallel()
	// Each launch spins 2 us in the fake (plus a 256-element add).
	r := runFake(t, []string{"FAKE_CUDA_KERNEL_NS=2000"}, "--kernels", "vector_add", "--n", "256", "--no-flush", "--repeats", "5")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	c := r.results.Cases[0]
	var batch int
	fmt.Sscan(c.Config["batch"], &batch)
	if batch < 10 || batch > 1<<16 {
		t.Fatalf("batch %q for a 2 us kernel; want tens of launches per sample", c.Config["batch"])
	}
	for _, s := range c.SamplesNS {
		if s < 2000 || s > 1e6 {
			t.Errorf("sample %v ns: want the per-launch time (>= the 2 us the fake spins)", s)
		}
	}
	// A long kernel needs no batching; --batch pins the count.
	r = runFake(t, []string{"FAKE_CUDA_KERNEL_NS=300000"}, "--kernels", "vector_add", "--n", "256", "--no-flush", "--repeats", "2")
	if got := r.results.Cases[0].Config["batch"]; got != "1" {
		t.Errorf("batch %q for a 300 us kernel, want 1", got)
	}
	r = runFake(t, nil, "--kernels", "vector_add", "--n", "256", "--repeats", "2", "--batch", "7")
	if got := r.results.Cases[0].Config["batch"]; got != "7" {
		t.Errorf("--batch 7 recorded %q", got)
	}
	if r := runFake(t, nil, "--batch", "0"); r.code != 2 {
		t.Errorf("--batch 0: exit %d, want 2", r.code)
	}
}

// The sustained loop on the cuda path: events around every repeat and the
// whole loop, the embedded checksum kernel (here the fake's host version)
// on every repeat, and a corrupted repeat found by number.
func TestFakeDriverSustained(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := runFake(t, nil, "--duration", "1", "--warmup", "0")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if time.Since(start) < time.Second {
		t.Errorf("a 1 s sustained run returned after %v", time.Since(start))
	}
	s := r.results.Sustained
	if s == nil {
		t.Fatalf("no sustained block:\n%s", r.stderr)
	}
	if s.Timing != suite.TimingCUDAEvents || s.Check != "checksum64" || s.DurationSeconds != 1 || s.ElapsedSeconds < 1 ||
		!(s.DutyCycle > 0 && s.DutyCycle <= 1) || s.BusySeconds <= 0 || s.Iterations < 1 || !s.Consistent || s.Mismatches != 0 || s.Error != "" {
		t.Errorf("sustained %+v", s)
	}
	checkSustainedCases(t, r.results, s)
	for _, m := range s.Memory {
		if m.DeviceUsedBytes <= 0 || m.HostRSSBytes <= 0 {
			t.Errorf("memory sample %+v: want host and device readings", m)
		}
	}
	// The fake flips a bit in the 6th launch of vector_add: with no
	// warm-up that is repeat 6. The harness flips repeat 3 of sgemm.
	// The burn case (gpuattest_burn_mma, the tensor-core burn, on the
	// fake's compute capability 9.0; here the fake's host version of its
	// mma.sync tiles) is a case of its own, checked exactly against the
	// host and compared repeat by repeat like the others.
	var burn *suite.Case
	for i, c := range r.results.Cases {
		if c.Kernel == "burn" {
			burn = &r.results.Cases[i]
		}
	}
	// Its name leaves out the iterations (a multiple of the 128 rounds
	// after which its fragments are back): its result does not depend on
	// them, so GPUs of one model compare it.
	if burn == nil || burn.Config["sm_count"] != "2" || burn.Config["grid"] != "16" || burn.Config["iters"] == "" || burn.Flops <= 0 ||
		burn.Correctness == nil || burn.Correctness.MaxAbsError != 0 || burn.Name != "burn/hmma/grid=16x256" || burn.Config["burn_kernel"] != "hmma" ||
		mustAtoi(t, burn.Config["iters"])%128 != 0 {
		t.Errorf("burn case %+v; want the tensor-core burn on 2 SMs x 8 blocks, exact against the host", burn)
	}
	// Without the burn case (--no-burn) the rounds are short enough for
	// the fake to reach vector_add's 6th launch within 0.5 s.
	r = runFake(t, []string{"FAKE_CUDA_CORRUPT=vector_add:6"}, "--duration", "0.5", "--warmup", "0", "--no-burn", "--inject-inconsistency", "sgemm")
	if r.code != 1 || r.results.Sustained == nil || r.results.Sustained.Consistent || r.results.Sustained.Mismatches != 2 {
		t.Fatalf("exit %d, sustained %+v; want exit 1, 2 mismatches\n%s", r.code, r.results.Sustained, r.stderr)
	}
	want := map[string]int64{"vector_add": 6, "sgemm": 3}
	for _, c := range r.results.Cases {
		if at, bad := want[c.Kernel]; bad {
			if c.Status != "failed" || c.Sustained.Mismatches != 1 || c.Sustained.FirstMismatch != at || !strings.Contains(c.Message, fmt.Sprintf("repeat %d differs from repeat 1", at)) {
				t.Errorf("%s: %s %q %+v; want failed at repeat %d", c.Name, c.Status, c.Message, c.Sustained, at)
			}
		} else if c.Status != "passed" {
			t.Errorf("%s: %s %q", c.Name, c.Status, c.Message)
		}
	}
	// A sticky fault in the first repeat: no loop, and later cases not run.
	r = runFake(t, []string{"FAKE_CUDA_STICKY=sgemm"}, "--duration", "0.5")
	checkContextLoss(t, r, "sgemm", "CUDA_ERROR_ILLEGAL_ADDRESS", true)
	if s := r.results.Sustained; s == nil || s.Consistent || !strings.Contains(s.Error, "context lost after sgemm") {
		t.Errorf("sustained %+v; want an error naming the lost context", s)
	}
}

// checkSustainedCases checks each case's account against the run's.
func checkSustainedCases(t *testing.T, res *suite.Results, s *suite.Sustained) {
	t.Helper()
	var checked int64
	for _, c := range res.Cases {
		if c.Status != "passed" || c.Sustained == nil || c.Sustained.Repeats < 2 || c.Sustained.Mismatches != 0 || c.Sustained.BusySeconds <= 0 ||
			len(c.SamplesNS) != 0 || c.Config["mode"] != "sustained" || !hex64.MatchString(c.OutputSHA256) {
			t.Errorf("%s: %s %q sustained %+v samples %d config %v", c.Name, c.Status, c.Message, c.Sustained, len(c.SamplesNS), c.Config)
			continue
		}
		checked += c.Sustained.Repeats - 1
	}
	if checked != s.OutputsChecked {
		t.Errorf("cases checked %d outputs, the run says %d", checked, s.OutputsChecked)
	}
	if len(s.Memory) < 3 || !slices.IsSortedFunc(s.Memory, func(a, b suite.MemorySample) int { return int(a.Iteration - b.Iteration) }) {
		t.Errorf("memory samples %+v: want at least 3, in order", s.Memory)
	}
}

// TestFakeDriverAutoNeverFallsBackOnAGPUMachine: when cuInit fails (802,
// CUDA_ERROR_SYSTEM_NOT_READY: the NVSwitch fabric manager has not
// started) on a machine whose hardware record lists GPUs
// (GPUATTEST_EXPECT_GPU, which gpuattest sets), --backend auto is an
// error naming the CUDA error, not a silent CPU run; without the
// variable auto still falls back; --backend cuda names the error too.
func TestFakeDriverAutoNeverFallsBackOnAGPUMachine(t *testing.T) {
	t.Parallel()
	lib, fatbins := fakeDriver(t)
	env := []string{"LD_LIBRARY_PATH=" + lib, "FAKE_CUDA_INIT_ERROR=802"}
	args := []string{"--fatbin-dir", fatbins, "--kernels", "vector_add", "--repeats", "1", "--warmup", "0"}
	refused := runHarness(t, append(env, "GPUATTEST_EXPECT_GPU=8"), append([]string{"--backend", "auto"}, args...)...)
	if refused.code != 3 || refused.results != nil || !strings.Contains(refused.stderr, "CUDA_ERROR_SYSTEM_NOT_READY, 802") ||
		!strings.Contains(refused.stderr, "refusing to fall back to the CPU backend") {
		t.Errorf("auto on a GPU machine: exit %d, results %v, stderr:\n%s", refused.code, refused.results != nil, refused.stderr)
	}
	cuda := runHarness(t, env, append([]string{"--backend", "cuda"}, args...)...)
	if cuda.code != 3 || !strings.Contains(cuda.stderr, "cuInit failed: system not yet initialized (CUDA_ERROR_SYSTEM_NOT_READY, 802)") {
		t.Errorf("cuda: exit %d, stderr:\n%s", cuda.code, cuda.stderr)
	}
	fallback := runHarness(t, env, append([]string{"--backend", "auto"}, args...)...)
	if fallback.code != 0 || fallback.results == nil || fallback.results.Backend != "cpu" {
		t.Errorf("auto without a GPU record: exit %d, stderr:\n%s", fallback.code, fallback.stderr)
	}
}

// Grids are sized from the GPU: the SM count times the occupancy
// calculator's blocks per SM (an H100's 132 SMs, 8 blocks of 256
// threads each, on the fake driver), capped by the work, and each case
// records sm_count, blocks_per_sm, grid and block. Before, reduce_sum
// ran a fixed 256x256 grid (24 % of an H100's thread slots).
func TestFakeDriverGridFromSMCount(t *testing.T) {
	t.Parallel()
	args := []string{"--repeats", "2", "--n", "1048576", "--gemm", "64", "--rows", "64", "--cols", "64"}
	for _, tc := range []struct {
		sms, grid string
	}{{"132", "1056"}, {"2", "16"}} {
		r := runFake(t, []string{"FAKE_CUDA_SMS=" + tc.sms}, args...)
		if r.code != 0 {
			t.Fatalf("%s SMs: exit %d\n%s", tc.sms, r.code, r.stderr)
		}
		for _, c := range r.results.Cases {
			want := map[string]string{"sm_count": tc.sms, "blocks_per_sm": "8"}
			switch c.Kernel {
			case "vector_add", "reduce_sum":
				want["grid"], want["block"] = tc.grid, "256"
			case "sgemm":
				want["grid"], want["block"], want["waves"] = "4x4", "16x16", "1"
			case "softmax":
				want["grid"], want["block"] = "64", "256"
			}
			for k, v := range want {
				if c.Config[k] != v {
					t.Errorf("%s SMs, %s: config[%s] = %q, want %q (config %v)", tc.sms, c.Name, k, c.Config[k], v, c.Config)
				}
			}
			if c.Status != "passed" {
				t.Errorf("%s SMs, %s: %s %q", tc.sms, c.Name, c.Status, c.Message)
			}
		}
	}
	cpu := runHarness(t, nil, append([]string{"--backend", "cpu", "--kernels", "reduce_sum"}, args...)...)
	if c := cpu.results.Cases[0]; c.Config["grid"] != "256" || c.Config["sm_count"] != "" {
		t.Errorf("cpu backend reduce_sum config %v, want its fixed grid 256 and no sm_count", c.Config)
	}
}

// The timed batch runs as one CUDA graph (the fake driver models stream
// capture, instantiation and graph launches: a captured launch keeps
// copies of its arguments, a graph launch runs them), after a warm-up of
// at least 200 ms or three batches within 2 % of each other; the config
// records both. --no-graph launches the batch directly.
func TestFakeDriverGraphAndTimedWarmup(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "graphs")
	r := runFake(t, []string{"FAKE_CUDA_GRAPH_LOG=" + log}, "--repeats", "3", "--n", "65536", "--gemm", "64", "--rows", "64", "--cols", "64")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("no graph was launched: %v", err)
	}
	launched := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var nodes int
		var kernel string
		if _, err := fmt.Sscanf(l, "graph %d %s", &nodes, &kernel); err != nil {
			t.Fatalf("graph log line %q: %v", l, err)
		}
		launched[fmt.Sprintf("%s/%d", kernel, nodes)]++
	}
	for _, c := range r.results.Cases {
		if c.Status != "passed" || c.Config["graph"] != "true" {
			t.Errorf("%s: %s %q, graph %q", c.Name, c.Status, c.Message, c.Config["graph"])
		}
		nodes := c.Config["batch"]
		if c.Kernel == "reduce_sum" { // two launches per run
			n, _ := strconv.Atoi(nodes)
			nodes = strconv.Itoa(2 * n)
		}
		// Every sample and warm-up batch is one graph launch.
		warm, _ := strconv.Atoi(c.Config["warmup_batches"])
		if got := launched[c.Kernel+"/"+nodes]; got < 3+warm || warm < 1 {
			t.Errorf("%s: %d graph launches of %s nodes, want the 3 samples and %d warm-up batches (log %v)", c.Name, got, nodes, warm, launched)
		}
		ms, err := strconv.ParseFloat(c.Config["warmup_ms"], 64)
		switch c.Config["warmup_stop"] {
		case "time":
			if err != nil || ms < 200 {
				t.Errorf("%s: warm-up stopped on time after %s ms", c.Name, c.Config["warmup_ms"])
			}
		case "stable":
			if err != nil || warm < 3 {
				t.Errorf("%s: warm-up stable after %d batches", c.Name, warm)
			}
		default:
			t.Errorf("%s: warmup_stop %q", c.Name, c.Config["warmup_stop"])
		}
	}
	direct := runFake(t, []string{"FAKE_CUDA_GRAPH_LOG=" + log + ".direct"}, "--repeats", "2", "--kernels", "vector_add", "--n", "65536", "--no-graph", "--warmup-ms", "0")
	if c := direct.results.Cases[0]; direct.code != 0 || c.Config["graph"] != "false: --no-graph" || c.Config["warmup_ms"] != "" {
		t.Errorf("--no-graph --warmup-ms 0: exit %d, config %v", direct.code, c.Config)
	}
	if _, err := os.Stat(log + ".direct"); err == nil {
		t.Error("--no-graph launched a graph")
	}
}

// The burn case takes most of each sustained round: its launch is sized
// to at least 80 % of the round against the other cases' time (here
// made 5 ms a launch by the fake), and --burn-kernel ffma runs the FFMA
// burn, also exact against the host. Before, the burn was sized to
// --burn-ms alone, whatever the other cases took.
func TestFakeDriverBurnTakesMostOfTheRound(t *testing.T) {
	t.Parallel()
	for _, kernel := range []string{"hmma", "ffma"} {
		r := runFake(t, []string{"FAKE_CUDA_KERNEL_NS=5000000"}, "--duration", "1.5", "--warmup", "0", "--n", "4096", "--gemm", "32", "--rows", "16", "--cols", "16", "--burn-kernel", kernel)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", kernel, r.code, r.stderr)
		}
		var burn, others float64
		for _, c := range r.results.Cases {
			if c.Sustained == nil {
				t.Fatalf("%s: %s has no sustained block", kernel, c.Name)
			}
			if c.Kernel == "burn" {
				burn = c.Sustained.BusySeconds
				if c.Config["burn_kernel"] != kernel || c.Correctness == nil || c.Correctness.MaxAbsError != 0 || !strings.HasPrefix(c.Name, "burn/"+kernel+"/") {
					t.Errorf("%s: burn case %s %+v", kernel, c.Name, c.Config)
				}
				target, _ := strconv.ParseFloat(c.Config["burn_target_ms"], 64)
				rest, _ := strconv.ParseFloat(c.Config["round_others_ms"], 64)
				if rest < 20 || target < 3.9*rest {
					t.Errorf("%s: burn sized to %v ms against %v ms of other cases", kernel, target, rest)
				}
			} else {
				others += c.Sustained.BusySeconds
			}
		}
		if share := burn / (burn + others); share <= 0.5 {
			t.Errorf("%s: the burn took %.0f %% of the busy time, want most (sized for 80 %%)", kernel, 100*share)
		}
	}
}

// The harness's own kernels (checksum, burn, memory sweep) load as the
// cubin for the device's compute capability, with no PTX JIT: with the
// fake's JIT removed (FAKE_CUDA_NO_JIT, as without
// libnvidia-ptxjitcompiler.so.1) a 9.0 device runs the sm_90 cubins and an
// 8.6 device sm_80's. A device with no shipped cubin (10.0) falls back to
// the PTX, which needs the JIT: without it the burn-in fails with error 221
// and a hint. The results record which was loaded ("code",
// "checksum_code").
func TestFakeDriverCubinOrPTX(t *testing.T) {
	t.Parallel()
	burnin := []string{"--duration", "0.5", "--warmup", "0", "--n", "4096", "--gemm", "32", "--rows", "16", "--cols", "16", "--burn-ms", "1"}
	for _, tc := range []struct {
		cc, code string
		noJIT    bool
		burn     []string
	}{
		{"9.0", "cubin sm_90", true, nil},
		{"9.0", "cubin sm_90", true, []string{"--burn-kernel", "ffma"}},
		{"8.6", "cubin sm_80", true, nil},
		{"8.0", "cubin sm_80", true, []string{"--burn-kernel", "ffma"}},
		{"10.0", "ptx (JIT)", false, nil},
		{"7.5", "ptx (JIT)", false, nil},
	} {
		env := []string{"FAKE_CUDA_CC=" + tc.cc}
		if tc.noJIT {
			env = append(env, "FAKE_CUDA_NO_JIT=1")
		}
		r := runFake(t, env, append(slices.Clone(burnin), tc.burn...)...)
		if r.code != 0 || r.results == nil {
			t.Errorf("CC %s %v: exit %d\n%s", tc.cc, env, r.code, r.stderr)
			continue
		}
		sawBurn := false
		for _, c := range r.results.Cases {
			if c.Status != suite.StatusPassed || c.Config["checksum_code"] != tc.code {
				t.Errorf("CC %s: %s %s %q, checksum_code %q, want %q", tc.cc, c.Name, c.Status, c.Message, c.Config["checksum_code"], tc.code)
			}
			if c.Kernel == "burn" {
				sawBurn = true
				if c.Config["code"] != tc.code {
					t.Errorf("CC %s: burn case %s loaded %q, want %q", tc.cc, c.Name, c.Config["code"], tc.code)
				}
			}
		}
		if !sawBurn {
			t.Errorf("CC %s: no burn case in %d cases", tc.cc, len(r.results.Cases))
		}
	}

	// No cubin for 10.0 and no JIT: the burn and the checksum fail, naming
	// the cause.
	r := runFake(t, []string{"FAKE_CUDA_CC=10.0", "FAKE_CUDA_NO_JIT=1"}, burnin...)
	if r.code != 1 || r.results == nil {
		t.Fatalf("CC 10.0 without JIT: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range r.results.Cases {
		if c.Status == suite.StatusPassed || !strings.Contains(c.Message, "error 221") || !strings.Contains(c.Message, "libnvidia-ptxjitcompiler.so.1") || !strings.Contains(c.Message, "on sm_100, no cubin") {
			t.Errorf("CC 10.0 without JIT: %s %s %q", c.Name, c.Status, c.Message)
		}
	}

	// The memory sweep loads checksum.cu's cubin too.
	r = runFake(t, []string{"FAKE_CUDA_NO_JIT=1"}, "--kernels", "vector_add", "--repeats", "1", "--memsweep", "0.85", "--memsweep-max", "1048576")
	if r.code != 0 || r.results == nil {
		t.Fatalf("memory sweep without JIT: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range r.results.Cases {
		if c.Kernel == "memsweep" && (c.Status != suite.StatusPassed || c.Config["code"] != "cubin sm_90") {
			t.Errorf("memory sweep: %s %q, code %q", c.Status, c.Message, c.Config["code"])
		}
	}
}
