package kernels_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// The tests in this file drive the harness on the fake CUDA driver
// (testdata/fakecuda), as the simulated 8-GPU node where they say so:
// SIMULATED, nothing here runs on a GPU. They are issue 31's: the
// self-check and the burn.

// deviceCase returns the case of kernel on the device with ordinal ord.
func deviceCase(t *testing.T, res *suite.Results, kernel string, ord int) suite.Case {
	t.Helper()
	for _, c := range res.Cases {
		if c.Kernel == kernel && c.Config["device_ordinal"] == strconv.Itoa(ord) {
			return c
		}
	}
	t.Fatalf("no %s case on device %d in %d cases", kernel, ord, len(res.Cases))
	return suite.Case{}
}

// With --devices the results have one shape whatever the number of
// devices: on a node of one GPU (the machine a first self-check meets)
// the devices list names it and a failed case's message names its UUID,
// as on eight. Before, one device wrote the --device shape (no devices
// list, no device in the messages), and the self-check's part 2 found no
// UUID and failed although the harness had caught the corruption.
func TestFakeDriverOneDeviceHasTheDevicesShape(t *testing.T) {
	t.Parallel()
	r := runFake(t, nil, "--devices", "all", "--duration", "1", "--warmup", "0", "--burn-ms", "1", "--inject-inconsistency", "sgemm@0")
	res := r.results
	if r.code != 1 || res == nil {
		t.Fatalf("exit %d, results %v; want exit 1 with results\n%s", r.code, res != nil, r.stderr)
	}
	if len(res.Devices) != 1 || res.Devices[0].Ordinal != 0 || res.Devices[0].UUID != fakeUUID(0) || res.DeviceUUID != "" {
		t.Fatalf("devices %+v, device_uuid %q; want the one device listed by UUID", res.Devices, res.DeviceUUID)
	}
	if x := res.CrossDevice; x == nil || x.Devices != 1 || x.CasesCompared != 0 {
		t.Errorf("cross_device %+v; want one device, nothing compared", x)
	}
	c := deviceCase(t, res, "sgemm", 0)
	if c.Status != suite.StatusFailed || !strings.HasSuffix(c.Name, "/gpu=0") || !strings.Contains(c.Message, "the output of repeat 3 differs from repeat 1") ||
		!strings.Contains(c.Message, fakeUUID(0)) {
		t.Errorf("%s: %s %q; want failed at repeat 3 naming %s", c.Name, c.Status, c.Message, fakeUUID(0))
	}
	// Without --devices the single-device shape stays.
	single := runFake(t, nil, "--repeats", "1", "--kernels", "vector_add")
	if single.code != 0 || len(single.results.Devices) != 0 || single.results.DeviceUUID != fakeUUID(0) || single.results.Cases[0].Name != "vector_add/n=65536/seed=1" {
		t.Errorf("--device alone: exit %d, devices %+v, uuid %q, case %q", single.code, single.results.Devices, single.results.DeviceUUID, single.results.Cases[0].Name)
	}
}

// A multiplier with a stuck bit fails the burn and names the GPU. On
// the simulated node the fake driver's device 5 computes every product
// of the tensor-core burn with the lowest bit of its 22-bit significand
// stuck at 0: only products of two full fp16 mantissas (both lowest bits
// set) show it, which the old burn (B = 1/2, A with three significant
// bits) never multiplied. Every warp is checked against the host (not
// 64), and the burn, whose result no longer depends on each GPU's
// calibrated iterations, is compared across the GPUs of the model.
func TestFakeDriverBurnCatchesAStuckMultiplierBit(t *testing.T) {
	t.Parallel()
	env, uuids := simulatedNode(t)
	r := runFake(t, append(env, "FAKE_CUDA_STUCK_BIT=0@5"), "--devices", "all", "--duration", "1", "--warmup", "0", "--burn-ms", "1", "--kernels", "vector_add")
	if r.code != 1 || r.results == nil {
		t.Fatalf("exit %d, results %v; want exit 1\n%s", r.code, r.results != nil, r.stderr)
	}
	for i := range uuids {
		c := deviceCase(t, r.results, "burn", i)
		warps := regexp.MustCompile(`of (\d+) warps differ`).FindStringSubmatch(c.Message)
		switch {
		case i == 5 && (c.Status != suite.StatusFailed || warps == nil || warps[1] != "128" || !strings.Contains(c.Message, uuids[5])):
			t.Errorf("%s: %s %q; want failed, every one of the 128 warps checked, naming %s", c.Name, c.Status, c.Message, uuids[5])
		case i != 5 && c.Status != suite.StatusPassed:
			t.Errorf("%s: %s %q; want passed", c.Name, c.Status, c.Message)
		}
		if c.Name != fmt.Sprintf("burn/hmma/grid=16x256/gpu=%d", i) {
			t.Errorf("burn case %q: want the same name on every GPU", c.Name)
		}
	}
	x := r.results.CrossDevice
	if x == nil || x.CasesCompared != 2 || len(x.Disagreements) != 1 || !strings.Contains(x.Disagreements[0], "burn/hmma") || !strings.Contains(x.Disagreements[0], uuids[5]) {
		t.Errorf("cross_device %+v; want vector_add and the burn compared, the burn on %s disagreeing", x, uuids[5])
	}
	// The harness's own injection does on a real GPU what the stuck bit
	// does here: one flipped mantissa bit in the burn's last pass.
	r = runFake(t, env, "--devices", "all", "--duration", "1", "--warmup", "0", "--burn-ms", "1", "--kernels", "vector_add", "--inject-fault", "burn@2")
	if c := deviceCase(t, r.results, "burn", 2); r.code != 1 || c.Status != suite.StatusFailed || !strings.Contains(c.Message, "1 of 128 warps differ") || !strings.Contains(c.Message, uuids[2]) {
		t.Errorf("--inject-fault burn@2: exit %d, %s %q", r.code, c.Status, c.Message)
	}
}

// The burn records what each GPU achieved: TFLOP/s over the device time
// its launches took, in total and per window of the loop. On the
// simulated node the fake driver runs device 3 at half clock (its
// rounds take twice as long): the burn is calibrated per GPU, so only
// its throughput shows it. gpuattest judges it (pipeline/suite's
// TestBurninHalfClockGPU); here, the figures.
func TestFakeDriverBurnThroughputPerGPU(t *testing.T) {
	t.Parallel()
	env, _ := simulatedNode(t)
	r := runFake(t, append(env, "FAKE_CUDA_CLOCK=0.5@3"), "--devices", "all", "--duration", "1.5", "--warmup", "0", "--burn-ms", "5", "--kernels", "vector_add")
	if r.code != 0 || r.results == nil {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	tflops := map[int]float64{}
	for _, d := range r.results.Devices {
		s := d.Sustained
		if s == nil || s.Burn == nil || s.Burn.Kernel != "hmma" || s.Burn.Launches < 1 || !(s.Burn.TFLOPS > 0) || len(s.Burn.Windows) == 0 ||
			s.LoopFromUnixNS <= 0 || s.LoopToUnixNS < s.LoopFromUnixNS {
			t.Fatalf("device %d: sustained %+v; want the burn's throughput and the loop's window", d.Ordinal, s)
		}
		var flops, busy float64
		for _, w := range s.Burn.Windows {
			flops += w.Flops
			busy += w.BusySeconds
		}
		if rel := flops/s.Burn.Flops - 1; rel > 1e-9 || rel < -1e-9 || busy > s.Burn.BusySeconds*1.000001 {
			t.Errorf("device %d: windows add up to %v flops in %v s, the burn says %v in %v s", d.Ordinal, flops, busy, s.Burn.Flops, s.Burn.BusySeconds)
		}
		tflops[d.Ordinal] = s.Burn.TFLOPS
	}
	for i, v := range tflops {
		ratio := v / tflops[0]
		if i == 3 && (ratio < 0.45 || ratio > 0.55) || i != 3 && (ratio < 0.95 || ratio > 1.05) {
			t.Errorf("device %d: %.4g TFLOP/s, %.2f of device 0's; want half on device 3 (half clock), the same elsewhere (%v)", i, v, ratio, tflops)
		}
	}
	if s := r.results.Sustained; s == nil || s.Burn != nil || s.LoopFromUnixNS <= 0 {
		t.Errorf("run's sustained block %+v; want the loops' span and no burn of its own (per device)", s)
	}
}

// The tensor-core burn streams through a buffer of its own beside the
// tensor cores (the bytes it moved are the case's bytes), and
// --burn-mem-every 0 turns that off.
func TestFakeDriverBurnStreamsMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		stream bool
	}{{nil, true}, {[]string{"--burn-mem-every", "0"}, false}} {
		r := runFake(t, nil, append([]string{"--duration", "0.5", "--warmup", "0", "--burn-ms", "2", "--kernels", "vector_add"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", tc.args, r.code, r.stderr)
		}
		for _, c := range r.results.Cases {
			if c.Kernel != "burn" {
				continue
			}
			// 4 MiB of fake L2: four times that.
			if got := c.Config["stream_bytes"] == "16777216" && c.Config["mem_every"] == "1" && c.Bytes > 16*512; got != tc.stream {
				t.Errorf("%v: burn config %v, bytes %v; want a stream: %v", tc.args, c.Config, c.Bytes, tc.stream)
			}
		}
	}
}

// The memory sweep runs hot: in a sustained run (the burn-in) its region
// is allocated after the cases and a slice of it is checked and
// rewritten every round, so it is swept again and again while the GPU
// is loaded; a word corrupted on device 5 fails that GPU's sweep, named
// by UUID, chunk and byte offset. Before, the sweep ran once, cold, in
// validate only.
func TestFakeDriverSweepRotatesThroughTheBurnin(t *testing.T) {
	t.Parallel()
	env, uuids := simulatedNode(t)
	r := runFake(t, env, "--devices", "all", "--duration", "2", "--warmup", "0", "--burn-ms", "1", "--kernels", "vector_add",
		"--memsweep", "0.5", "--memsweep-max", "1048576", "--memsweep-slice", "524288", "--inject-fault", "memsweep@5")
	if r.code != 1 || r.results == nil {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for i := range uuids {
		c := deviceCase(t, r.results, "memsweep", i)
		sweeps, _ := strconv.Atoi(c.Config["sweeps"])
		if c.Name != fmt.Sprintf("memsweep/fraction=0.5/sustained/gpu=%d", i) || c.Config["bytes_covered"] != "1048576" || sweeps < 1 || c.Config["slices"] != "2" {
			t.Errorf("%s: config %v; want 1 MiB in 2 slices swept at least once", c.Name, c.Config)
		}
		if i == 5 {
			if c.Status != suite.StatusFailed || !strings.Contains(c.Message, "first at chunk 0 (of 1), byte offset 4") || !strings.Contains(c.Message, uuids[5]) ||
				c.Config["first_error_offset"] != "4" {
				t.Errorf("%s: %s %q %v; want failed at chunk 0, offset 4, naming %s", c.Name, c.Status, c.Message, c.Config, uuids[5])
			}
		} else if c.Status != suite.StatusPassed {
			t.Errorf("%s: %s %q", c.Name, c.Status, c.Message)
		}
	}
	// The cold sweep of validate names chunk and offset too.
	cold := runFake(t, nil, "--kernels", "vector_add", "--repeats", "1", "--memsweep", "0.85", "--memsweep-max", "1048576", "--inject-fault", "memsweep")
	if c := cold.results.Cases[1]; c.Status != suite.StatusFailed || !strings.Contains(c.Message, "first at chunk 0 (of 1), byte offset 4 (0x4)") {
		t.Errorf("cold sweep: %s %q", c.Status, c.Message)
	}
}

// Hangs where the watchdog did not reach: cuInit and creating a context
// ran on device 0's thread before the watchdog started. Now cuInit is
// bounded by --watchdog (a hung one fails, named, with a results file),
// and every device is opened on a thread of its own under the watchdog,
// so a device whose context never comes is named by UUID.
func TestFakeDriverHangAtInit(t *testing.T) {
	t.Parallel()
	fakeDriver(t) // built before the clock starts
	buildHarness(t)
	start := time.Now()
	r := runFake(t, []string{"FAKE_CUDA_HANG=init"}, "--repeats", "1", "--watchdog", "2", "--kernels", "vector_add")
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("a hung cuInit took %v to fail with --watchdog 2", el)
	}
	if r.code != 1 || !strings.Contains(r.stderr, "cuInit did not return within 2 s") || r.results == nil || len(r.results.Cases) != 1 ||
		r.results.Cases[0].Status != suite.StatusError || !strings.Contains(r.results.Cases[0].Message, "cuInit did not return") {
		t.Errorf("hung cuInit: exit %d, results %+v\n%s", r.code, r.results, r.stderr)
	}
	env, uuids := simulatedNode(t)
	start = time.Now()
	r = runFake(t, append(env, "FAKE_CUDA_HANG=init@0"), "--devices", "all", "--repeats", "1", "--watchdog", "2", "--kernels", "vector_add")
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("a hung context creation took %v to fail with --watchdog 2", el)
	}
	want := "no progress for 2 s on gpu 0 (" + uuids[0] + ") in opening the device"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("hung context on device 0: exit %d; want %q\n%s", r.code, want, r.stderr)
	}
}

// A device whose context cannot be created marks that GPU, not the
// node: device 0 of the simulated node answers cuCtxCreate with an
// error; its cases are "not run" naming the error and its UUID, the
// other seven run. Before, device 0 was opened on the main thread, and
// its failure made the whole backend unavailable.
func TestFakeDriverDeviceThatCannotOpen(t *testing.T) {
	t.Parallel()
	env, uuids := simulatedNode(t)
	r := runFake(t, append(env, "FAKE_CUDA_CTX_ERROR=999@0"), "--devices", "all", "--repeats", "1", "--warmup", "0", "--kernels", "vector_add,sgemm")
	if r.code != 1 || r.results == nil || len(r.results.Devices) != 8 {
		t.Fatalf("exit %d, results %+v\n%s", r.code, r.results, r.stderr)
	}
	if d := r.results.Devices[0]; !strings.Contains(d.Error, "opening device 0: cuCtxCreate") || d.UUID != uuids[0] || d.Passed != 0 {
		t.Errorf("device 0: %+v; want its open error and UUID", d)
	}
	for _, c := range r.results.Cases {
		if c.Config["device_ordinal"] == "0" {
			if c.Status != suite.StatusError || !strings.Contains(c.Message, "not run: opening device 0: cuCtxCreate") || !strings.Contains(c.Message, uuids[0]) {
				t.Errorf("%s: %s %q", c.Name, c.Status, c.Message)
			}
		} else if c.Status != suite.StatusPassed {
			t.Errorf("%s: %s %q; want passed", c.Name, c.Status, c.Message)
		}
	}
}

// A sustained run keeps no copy of its cases' inputs, references or
// first outputs on the host once the loop compares checksums: its host
// memory is the fake driver's device allocations (host memory here) and
// little more. Before, vector_add alone kept its two inputs, its fp64
// reference and its first output, 48 bytes per element: at the sustained
// sizes about 2 GB per GPU.
func TestFakeDriverSustainedHostMemory(t *testing.T) {
	t.Parallel()
	const n = 4 << 20 // 4M elements: 192 MiB of host copies before
	r := runFake(t, nil, "--duration", "1", "--warmup", "0", "--no-burn", "--kernels", "vector_add", "--n", strconv.Itoa(n))
	if r.code != 0 || r.results.Sustained == nil {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	m := r.results.Sustained.Memory
	last := m[len(m)-1]
	// The fake's device memory (three vectors, the L2 flush, the checksum
	// partials) is host memory too.
	extra := last.HostRSSBytes - last.DeviceUsedBytes
	if limit := int64(n) * 4; extra > limit {
		t.Errorf("host RSS %d, device %d: %d bytes on the host beyond the device's; want under %d (one vector)", last.HostRSSBytes, last.DeviceUsedBytes, extra, limit)
	}
}

// The bandwidth case (--membw): a device-local copy, timed like the
// other cases, whose bytes are what it reads and writes; it is checked
// against the pattern its source holds. On the cpu backend there is none.
func TestFakeDriverBandwidthCase(t *testing.T) {
	t.Parallel()
	r := runFake(t, nil, "--kernels", "vector_add", "--repeats", "3", "--membw", "--membw-bytes", "4194304")
	if r.code != 0 || len(r.results.Cases) != 2 {
		t.Fatalf("exit %d, %d cases\n%s", r.code, len(r.results.Cases), r.stderr)
	}
	c := r.results.Cases[1]
	if c.Kernel != "membw" || c.Name != "membw/bytes=4194304" || c.Status != suite.StatusPassed || c.Bytes != 2*4194304 || c.Flops != 0 || len(c.SamplesNS) != 3 ||
		c.Config["floor_metric"] != "memory_bandwidth" || c.Config["code"] != "cubin sm_90" {
		t.Errorf("bandwidth case %+v", c)
	}
	cpu := runHarness(t, nil, "--backend", "cpu", "--kernels", "vector_add", "--repeats", "1", "--membw")
	if cpu.code != 0 || len(cpu.results.Cases) != 1 || !strings.Contains(cpu.stderr, "no bandwidth case") {
		t.Errorf("cpu backend --membw: exit %d, %d cases\n%s", cpu.code, len(cpu.results.Cases), cpu.stderr)
	}
}

// The embedded cubins and PTX are aligned (alignas(64)): the driver
// reads a cubin's ELF headers in place.
func TestEmbeddedCodeAligned(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"checksum_cubin.h", "burn_mma_cubin.h", "checksum_ptx.h", "burn_mma_ptx.h"} {
		b, err := os.ReadFile("harness/" + h)
		if err != nil {
			t.Fatal(err)
		}
		arrays := regexp.MustCompile(`(?m)^(alignas\(64\) )?const (unsigned )?char \w+\[\]`).FindAllStringSubmatch(string(b), -1)
		if len(arrays) == 0 {
			t.Fatalf("harness/%s: no array", h)
		}
		for _, a := range arrays {
			if a[1] == "" {
				t.Errorf("harness/%s: %q is not alignas(64)", h, a[0])
			}
		}
	}
}
