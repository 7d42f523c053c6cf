package kernels_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// simulatedNode is the simulated 8-GPU HGX H100 node (go-nvml's dgxh100
// mock) as the fake CUDA driver presents it: the same UUIDs, one model
// name marked as the fake driver's. Nothing here runs on a GPU.
func simulatedNode(t *testing.T) (env []string, uuids []string) {
	t.Helper()
	s, err := gpu.Simulate("h100:8")
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Count() {
		uuids = append(uuids, s.Device(i).UUID)
	}
	model, _ := s.Device(0).GetName()
	name := model + " (simulated: fake driver)"
	return []string{"FAKE_CUDA_DEVICES=8", "FAKE_CUDA_UUIDS=" + strings.Join(uuids, ","), "FAKE_CUDA_NAME=" + name}, uuids
}

// checkEveryGPU checks a --devices all run of the four kernels on the
// simulated node: one entry per GPU by UUID, every case per GPU, and
// every case failed only on the GPUs bad says (kernel -> ordinal), with
// a message naming that GPU's UUID and containing want.
func checkEveryGPU(t *testing.T, r run, uuids []string, perGPU int, bad map[string]int, want string) {
	t.Helper()
	res := r.results
	if res == nil {
		t.Fatalf("no results, exit %d\n%s", r.code, r.stderr)
	}
	if len(res.Devices) != len(uuids) || res.DeviceUUID != "" || !strings.HasPrefix(res.Device, "NVIDIA H100") {
		t.Fatalf("devices %+v, device %q uuid %q; want one entry per GPU of the node", res.Devices, res.Device, res.DeviceUUID)
	}
	for i, d := range res.Devices {
		if d.Ordinal != i || d.UUID != uuids[i] || d.Cases != perGPU {
			t.Errorf("device %d: %+v; want uuid %s and %d cases", i, d, uuids[i], perGPU)
		}
	}
	if len(res.Cases) != perGPU*len(uuids) {
		t.Fatalf("%d cases, want %d per GPU", len(res.Cases), perGPU)
	}
	failed := 0
	for _, c := range res.Cases {
		var ord int
		fmt.Sscan(c.Config["device_ordinal"], &ord)
		if !strings.HasSuffix(c.Name, fmt.Sprintf("/gpu=%d", ord)) || c.Config["device_uuid"] != uuids[ord] {
			t.Errorf("%s: config %v; want the name to end /gpu=%d and device_uuid %s", c.Name, c.Config, ord, uuids[ord])
		}
		if at, ok := bad[c.Kernel]; ok && at == ord {
			failed++
			if c.Status != suite.StatusFailed || !strings.Contains(c.Message, uuids[ord]) || !strings.Contains(c.Message, want) {
				t.Errorf("%s: %s %q; want failed naming %s and %q", c.Name, c.Status, c.Message, uuids[ord], want)
			}
		} else if c.Status != suite.StatusPassed {
			t.Errorf("%s: %s %q; want passed", c.Name, c.Status, c.Message)
		}
	}
	if failed != len(bad) {
		t.Errorf("%d failed cases, want %d", failed, len(bad))
	}
	if wantCode := map[bool]int{true: 0, false: 1}[len(bad) == 0]; r.code != wantCode {
		t.Errorf("exit %d, want %d\n%s", r.code, wantCode, r.stderr)
	}
}

// Every visible GPU is validated at once, one context and host thread
// each, and each case's output is compared between the GPUs of one
// model: a GPU that computes one kernel consistently wrong, by one bit
// and so within the kernel's tolerance of the fp64 reference, fails that
// case by its UUID on the simulated 8-GPU node. Before --devices, only
// device 0 ran and the fault on device 5 went unseen.
func TestFakeDriverEveryGPUValidated(t *testing.T) {
	t.Parallel()
	env, uuids := simulatedNode(t)
	clean := runFake(t, env, "--devices", "all", "--repeats", "2", "--warmup", "1", "--no-flush")
	checkEveryGPU(t, clean, uuids, 4, nil, "")
	if x := clean.results.CrossDevice; x == nil || x.Devices != 8 || x.CasesCompared != 4 || len(x.Disagreements) != 0 {
		t.Errorf("cross-device comparison %+v; want 4 cases compared over 8 GPUs, no disagreement", x)
	}
	r := runFake(t, append(env, "FAKE_CUDA_CORRUPT=sgemm:*@5"), "--devices", "all", "--repeats", "2", "--warmup", "1", "--no-flush")
	checkEveryGPU(t, r, uuids, 4, map[string]int{"sgemm": 5}, "output differs from the other")
	if x := r.results.CrossDevice; x == nil || len(x.Disagreements) != 1 || !strings.Contains(x.Disagreements[0], uuids[5]) {
		t.Errorf("cross-device comparison %+v; want one disagreement naming %s", x, uuids[5])
	}
	if c := r.results.Cases[2*8+5]; c.Correctness == nil || c.Correctness.MaxAbsError > c.Correctness.Tolerance {
		t.Errorf("%s: correctness %+v; the flipped bit should be within tolerance (only the comparison finds it)", c.Name, c.Correctness)
	}
}

// The burn-in runs every GPU at once, each with its own sustained loop; a
// repeat corrupted on device 5 (by the fake driver, and by the harness's
// --inject-inconsistency KERNEL@5) fails naming the repeat and device 5's
// UUID, and the run's sustained block sums the devices' loops.
func TestFakeDriverEveryGPUBurnedIn(t *testing.T) {
	t.Parallel()
	env, uuids := simulatedNode(t)
	// Launch 4 of vector_add is repeat 3 (no warm-up; launch 2 times the
	// round the burn is sized against): early enough for a loaded machine
	// to reach within the second.
	r := runFake(t, append(env, "FAKE_CUDA_CORRUPT=vector_add:4@5"), "--devices", "all", "--duration", "1.5", "--warmup", "0", "--burn-ms", "0.5", "--inject-inconsistency", "sgemm@5")
	// Four kernels and the burn case per GPU.
	checkEveryGPU(t, r, uuids, 5, map[string]int{"vector_add": 5, "sgemm": 5}, "differs from repeat 1")
	for _, c := range r.results.Cases {
		if c.Config["device_ordinal"] != "5" {
			continue
		}
		if at := map[string]string{"vector_add": "repeat 3 ", "sgemm": "repeat 3 "}[c.Kernel]; at != "" && !strings.Contains(c.Message, at) {
			t.Errorf("%s: %q; want %q", c.Name, c.Message, at)
		}
	}
	s := r.results.Sustained
	var checked int64
	for _, d := range r.results.Devices {
		if d.Sustained == nil || d.Sustained.Iterations < 1 || d.Sustained.DutyCycle <= 0 {
			t.Errorf("device %d: sustained %+v", d.Ordinal, d.Sustained)
			continue
		}
		checked += d.Sustained.OutputsChecked
		if want := map[bool]int64{true: 2, false: 0}[d.Ordinal == 5]; d.Sustained.Mismatches != want {
			t.Errorf("device %d: %d mismatches, want %d", d.Ordinal, d.Sustained.Mismatches, want)
		}
	}
	if s == nil || s.Consistent || s.Mismatches != 2 || s.OutputsChecked != checked {
		t.Errorf("sustained %+v; want 2 mismatches and the devices' %d outputs checked", s, checked)
	}
}

// A GPU that stops answering cannot hang the run: with --watchdog S a
// device that makes no progress for S seconds fails the run, named with
// its UUID and the case it hung in, and the results keep what the other
// devices finished.
func TestFakeDriverWatchdogNamesTheHungGPU(t *testing.T) {
	t.Parallel()
	env, uuids := simulatedNode(t)
	start := time.Now()
	r := runFake(t, append(env, "FAKE_CUDA_HANG=softmax@3"), "--devices", "all", "--repeats", "2", "--warmup", "0", "--watchdog", "3", "--gemm", "32", "--n", "4096", "--no-flush")
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("the watchdog took %v", el)
	}
	want := "no progress for 3 s on gpu 3 (" + uuids[3] + ") in softmax/"
	if r.code != 1 || !strings.Contains(r.stderr, want) || r.results == nil {
		t.Fatalf("exit %d, results %v; want exit 1 and stderr naming %q\n%s", r.code, r.results != nil, want, r.stderr)
	}
	var hung bool
	for _, c := range r.results.Cases {
		if strings.HasSuffix(c.Name, "/gpu=3") && c.Kernel == "softmax" {
			hung = c.Status == suite.StatusError && strings.Contains(c.Message, want)
		}
	}
	if !hung {
		t.Errorf("no error case for the hung softmax on gpu 3: %+v", r.results.Cases)
	}
	// One device, no --devices: the same watchdog.
	r = runFake(t, []string{"FAKE_CUDA_HANG=sgemm"}, "--repeats", "2", "--warmup", "0", "--watchdog", "3", "--gemm", "32", "--n", "4096", "--no-flush")
	if r.code != 1 || !strings.Contains(r.stderr, "no progress for 3 s on gpu 0 ("+fakeUUID(0)+") in sgemm/") {
		t.Errorf("one device: exit %d\n%s", r.code, r.stderr)
	}
}

// The memory sweep (--memsweep F) runs on every GPU after the cases: each
// reports the bytes it covered, and a word corrupted between writing and
// checking a pass on device 5 fails that GPU's sweep by UUID. On the cpu
// backend the sweep is a scaled-down host buffer and says so.
func TestFakeDriverMemorySweepEveryGPU(t *testing.T) {
	t.Parallel()
	env, uuids := simulatedNode(t)
	r := runFake(t, env, "--devices", "all", "--kernels", "vector_add", "--repeats", "1", "--warmup", "0", "--no-flush",
		"--memsweep", "0.85", "--memsweep-max", "4194304", "--inject-fault", "memsweep@5")
	if r.code != 1 || r.results == nil {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	sweeps := 0
	for _, c := range r.results.Cases {
		if c.Kernel != "memsweep" {
			continue
		}
		sweeps++
		var ord int
		fmt.Sscan(c.Config["device_ordinal"], &ord)
		if c.Config["bytes_covered"] != "4194304" || c.Config["passes"] != "4" || c.Config["free_bytes"] == "" {
			t.Errorf("%s: config %v; want 4 MiB covered in 4 passes, the free memory recorded", c.Name, c.Config)
		}
		bad := ord == 5
		if bad != (c.Status == suite.StatusFailed) || (bad && (!strings.Contains(c.Message, "1 of 1048576 words differ") || !strings.Contains(c.Message, uuids[5]))) {
			t.Errorf("%s: %s %q", c.Name, c.Status, c.Message)
		}
	}
	if sweeps != 8 {
		t.Errorf("%d sweeps, want one per GPU", sweeps)
	}
	cpu := runHarness(t, nil, "--backend", "cpu", "--kernels", "vector_add", "--repeats", "1", "--memsweep", "0.85", "--memsweep-max", "1048576")
	if cpu.code != 0 || len(cpu.results.Cases) != 2 || cpu.results.Cases[1].Config["scaled_down"] != "true" || cpu.results.Cases[1].Config["bytes_covered"] != "1048576" {
		t.Errorf("cpu sweep: exit %d %+v", cpu.code, cpu.results)
	}
}
