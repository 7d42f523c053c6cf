//go:build linux && cgo

package gpu

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/hardware"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func mustSimulate(t *testing.T, spec string) *Simulated {
	t.Helper()
	s, err := Simulate(spec)
	if err != nil {
		t.Fatalf("Simulate(%q): %v", spec, err)
	}
	return s
}

func TestCollectSimulatedH100(t *testing.T) {
	t.Parallel()
	rec, err := Collect(t.Context(), WithSource(mustSimulate(t, "h100:2")))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Simulated {
		t.Error("simulated = false, want true")
	}
	if rec.Reason != "" {
		t.Errorf("reason = %q, want empty", rec.Reason)
	}
	if len(rec.GPUs) != 2 {
		t.Fatalf("got %d GPUs, want 2", len(rec.GPUs))
	}
	want := hardware.GPU{
		Index:               0,
		Name:                "NVIDIA H100 80GB HBM3",
		UUID:                simUUID("h100", 0),
		PCIBusID:            "00000000:18:00.0",
		PCIDeviceID:         "0x233010DE",
		VBIOS:               "96.00.74.00.0D",
		ComputeCapability:   "9.0",
		MemoryTotalBytes:    ptr(uint64(81920) << 20),
		ECCEnabled:          ptr(true),
		MIGEnabled:          ptr(false),
		PersistenceMode:     ptr(true),
		PowerLimitWatts:     ptr(700.0),
		MaxClocksMHz:        &hardware.Clocks{SM: ptr(uint32(1980)), Mem: ptr(uint32(2619))},
		PCIe:                &hardware.PCIe{Gen: ptr(5), Width: ptr(16)},
		RemappedRowsFailed:  ptr(false),
		RemappedRowsPending: ptr(false),
		// RecoveryAction: the simulated driver does not report the field.
		// RetiredPagesPending: not supported on row-remapping GPUs: omitted.
	}
	if diff := cmp.Diff(want, rec.GPUs[0]); diff != "" {
		t.Errorf("GPU 0 (-want +got):\n%s", diff)
	}
	if rec.GPUs[1].Index != 1 || rec.GPUs[1].UUID == rec.GPUs[0].UUID || rec.GPUs[1].PCIBusID != "00000000:2A:00.0" {
		t.Errorf("GPU 1 = %+v: want index 1, its own UUID and bus 2A", rec.GPUs[1])
	}
	if rec.DriverVersion != "550.54.15" || rec.CUDADriverVersion != "12.4" || rec.NVMLVersion != "12.550.54.15" {
		t.Errorf("versions = %q %q %q", rec.DriverVersion, rec.CUDADriverVersion, rec.NVMLVersion)
	}
	if !strings.HasPrefix(rec.Digest, "sha256:") || len(rec.Digest) != len("sha256:")+64 {
		t.Errorf("digest = %q", rec.Digest)
	}
	if err := rec.Verify(); err != nil {
		t.Error(err)
	}
}

// TestRecordJSONFields pins the JSON field names the attestation predicate
// reuses, and that an unsupported metric is omitted rather than zero.
func TestRecordJSONFields(t *testing.T) {
	t.Parallel()
	rec, err := Collect(t.Context(), WithFakeGPU("a100"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		return k
	}
	sortStrings := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	wantTop := []string{"simulated", "host", "driver_version", "cuda_driver_version", "nvml_version", "gpus", "digest"}
	if diff := cmp.Diff(wantTop, keys(m), sortStrings); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	g := m["gpus"].([]any)[0].(map[string]any)
	wantGPU := []string{"index", "name", "uuid", "pci_bus_id", "pci_device_id", "vbios", "compute_capability",
		"memory_total_bytes", "ecc_enabled", "mig_enabled", "persistence_mode", "power_limit_watts",
		"max_clocks_mhz", "pcie", "remapped_rows_failed", "remapped_rows_pending"}
	if diff := cmp.Diff(wantGPU, keys(g), sortStrings); diff != "" {
		t.Errorf("gpu keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"sm", "mem"}, keys(g["max_clocks_mhz"].(map[string]any)), sortStrings); diff != "" {
		t.Errorf("max_clocks_mhz keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gen", "width"}, keys(g["pcie"].(map[string]any)), sortStrings); diff != "" {
		t.Errorf("pcie keys (-want +got):\n%s", diff)
	}
	if g["compute_capability"] != "8.0" {
		t.Errorf("a100 compute_capability = %v", g["compute_capability"])
	}
}

func TestUnsupportedMetricOmitted(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100")
	d := s.Device(0)
	d.GetVbiosVersionFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetMaxClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
	d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rec.GPUs[0])
	for _, k := range []string{"vbios", "power_limit_watts", "max_clocks_mhz", "ecc_enabled", "retired_pages_pending"} {
		if strings.Contains(string(b), `"`+k+`"`) {
			t.Errorf("unsupported %s present in %s", k, b)
		}
	}
}

func TestDigestStable(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"h100", "a100:8", "h200:2"} {
		// Two separate sources: the mock servers are rebuilt from scratch.
		a, err := Collect(t.Context(), WithFakeGPU(spec))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Collect(t.Context(), WithFakeGPU(spec))
		if err != nil {
			t.Fatal(err)
		}
		if a.Digest != b.Digest {
			t.Errorf("%s: digests differ between two collections: %s vs %s", spec, a.Digest, b.Digest)
		}
	}
	// The real (here: GPU-less) state is stable too.
	a, _ := Collect(t.Context())
	b, _ := Collect(t.Context())
	if a.Digest != b.Digest {
		t.Errorf("nvml: digests differ: %s vs %s", a.Digest, b.Digest)
	}
}

func TestDigestSensitivity(t *testing.T) {
	t.Parallel()
	h100, err := Collect(t.Context(), WithFakeGPU("h100"))
	if err != nil {
		t.Fatal(err)
	}
	h200, err := Collect(t.Context(), WithFakeGPU("h200"))
	if err != nil {
		t.Fatal(err)
	}
	if h100.Digest == h200.Digest {
		t.Error("h100 and h200 records have the same digest")
	}
	// Volatile health flags do not change the digest; configuration does.
	c := *h100
	c.GPUs = append([]hardware.GPU(nil), h100.GPUs...)
	c.GPUs[0].RemappedRowsFailed = ptr(true)
	c.GPUs[0].RetiredPagesPending = ptr(true)
	if d, _ := hardware.ComputeDigest(&c); d != h100.Digest {
		t.Errorf("health flags changed the digest: %s vs %s", d, h100.Digest)
	}
	c.GPUs[0].PowerLimitWatts = ptr(500.0)
	if d, _ := hardware.ComputeDigest(&c); d == h100.Digest {
		t.Error("a different power limit kept the same digest")
	}
	c.Digest = h100.Digest
	if err := c.Verify(); err == nil {
		t.Error("Verify accepted an edited record")
	}
}

func TestSimulateSpecs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec      string
		wantCount int
		wantName  string
		wantErr   string
	}{
		{spec: "h100", wantCount: 1, wantName: "NVIDIA H100 80GB HBM3"},
		{spec: "H100:8", wantCount: 8, wantName: "NVIDIA H100 80GB HBM3"},
		{spec: "a100:2", wantCount: 2, wantName: "Mock NVIDIA A100-SXM4-40GB"},
		{spec: "h200:4", wantCount: 4, wantName: "NVIDIA H200 141GB HBM3e"},
		{spec: "v100", wantErr: "hint: use one of h100, a100, h200"},
		{spec: "", wantErr: "unknown simulated GPU"},
		{spec: "h100:0", wantErr: "count \"0\" must be a whole number from 1 to 64"},
		{spec: "h100:x", wantErr: "count \"x\""},
		{spec: "h100:65", wantErr: "from 1 to 64"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Simulate(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Count() != tt.wantCount {
				t.Errorf("count = %d, want %d", s.Count(), tt.wantCount)
			}
			name, _ := s.Device(0).GetName()
			if name != tt.wantName {
				t.Errorf("name = %q, want %q", name, tt.wantName)
			}
		})
	}
}

func TestSourceFromEnv(t *testing.T) {
	t.Parallel()
	src, err := SourceFromEnv("")
	if err != nil || src.Simulated() {
		t.Errorf("SourceFromEnv(\"\") = %v, %v: want real NVML", src, err)
	}
	src, err = SourceFromEnv("a100:3")
	if err != nil || !src.Simulated() || src.String() != "simulated a100:3" {
		t.Errorf("SourceFromEnv(a100:3) = %v, %v", src, err)
	}
	if _, err := SourceFromEnv("b300"); err == nil || !strings.Contains(err.Error(), FakeGPUEnv) {
		t.Errorf("SourceFromEnv(b300) err = %v, want naming %s", err, FakeGPUEnv)
	}
}

// TestNoLibrary is a real test of NVML's dlopen failing: the path does not
// exist on any machine.
func TestNoLibrary(t *testing.T) {
	t.Parallel()
	src := NVML(filepath.Join(t.TempDir(), "libnvidia-ml.so.1"))
	_, _, err := src.Open()
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrNoGPU) {
		t.Fatalf("Open err = %v, want *UnavailableError", err)
	}
	if ue.Return != nvml.ERROR_LIBRARY_NOT_FOUND || !strings.Contains(ue.Reason, "not found") {
		t.Errorf("got %v (%q), want library not found", ue.Return, ue.Reason)
	}
	rec, err := Collect(t.Context(), WithSource(src))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Simulated || len(rec.GPUs) != 0 || rec.GPUs == nil || !strings.Contains(rec.Reason, "NVML library") {
		t.Errorf("record = %+v, want empty gpus ([] not null) and the library reason", rec)
	}
}

// TestThisMachine collects from the real NVML of the machine the tests run
// on, and checks the record against what the kernel says, read without
// NVML: with no NVIDIA kernel module (no /proc/driver/nvidia) and no
// WSL2 GPU device, the record must have no GPU and the reason; when the
// kernel module lists GPUs (/proc/driver/nvidia/gpus), NVML must find at
// least one (a container may see fewer than the host has). Every GPU must
// carry a name, UUID and compute capability.
func TestThisMachine(t *testing.T) {
	t.Parallel()
	rec, err := Collect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Simulated {
		t.Error("real NVML record says simulated")
	}
	if rec.Host.Kernel == "" || rec.Host.CPUCores == 0 || rec.Host.MemoryBytes == 0 {
		t.Errorf("host facts missing: %+v", rec.Host)
	}
	kernelGPUs, _ := os.ReadDir(filepath.Join(driverProcDir, "gpus"))
	_, noModule := os.Stat(driverProcDir)
	_, noWSL := os.Stat(wslDevice)
	switch {
	case noModule != nil && noWSL != nil && len(rec.GPUs) != 0:
		t.Errorf("no %s and no %s, yet %d GPUs collected: %+v", driverProcDir, wslDevice, len(rec.GPUs), rec.GPUs)
	case noModule != nil && noWSL != nil && !strings.Contains(rec.Reason, "driver not loaded"):
		t.Errorf("no NVIDIA kernel module: reason %q, want it to say the driver is not loaded", rec.Reason)
	case len(kernelGPUs) > 0 && len(rec.GPUs) == 0:
		t.Errorf("the kernel module lists %d GPU(s) in %s/gpus, but none was collected: %s\nhint: NVML (libnvidia-ml.so.1) should see the driver's GPUs", len(kernelGPUs), driverProcDir, rec.Reason)
	case len(rec.GPUs) == 0 && rec.Reason == "":
		t.Error("no GPUs and no reason")
	}
	if len(rec.GPUs) == 0 {
		t.Logf("this machine: no GPU: %s", rec.Reason)
		return
	}
	for _, g := range rec.GPUs {
		if g.Name == "" || g.UUID == "" || g.ComputeCapability == "" {
			t.Errorf("GPU %d incomplete: %+v", g.Index, g)
		}
	}
}

func TestHostParsers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/cpuinfo", "processor\t: 0\nmodel name\t: AMD EPYC 7742 64-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7742 64-Core Processor\n")
	write("proc/meminfo", "MemTotal:       2113419748 kB\nMemFree: 1 kB\n")
	write("proc/sys/kernel/osrelease", "5.15.0-105-generic\n")
	write("etc/os-release", "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\n")
	rec, err := Collect(t.Context(), WithHostRoot(root), WithFakeGPU("h100"))
	if err != nil {
		t.Fatal(err)
	}
	want := hardware.Host{CPUModel: "AMD EPYC 7742 64-Core Processor", CPUCores: 2, MemoryBytes: 2113419748 * 1024, Kernel: "5.15.0-105-generic", OS: "Ubuntu 22.04.4 LTS"}
	if diff := cmp.Diff(want, rec.Host); diff != "" {
		t.Errorf("host (-want +got):\n%s", diff)
	}
}

// TestCollectHonoursCUDAVisibleDevices: the record lists only the GPUs
// CUDA_VISIBLE_DEVICES leaves visible (by index or UUID), in NVML order
// with their machine-wide indices, and says so.
func TestCollectHonoursCUDAVisibleDevices(t *testing.T) {
	t.Parallel()
	all, err := Collect(t.Context(), WithFakeGPU("h100:4"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CUDA_VISIBLE_DEVICES": all.GPUs[3].UUID + ",1"}
	rec, err := Collect(t.Context(), WithFakeGPU("h100:4"), WithVisibleDevices(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.GPUs) != 2 || rec.GPUs[0].Index != 1 || rec.GPUs[1].Index != 3 || rec.GPUs[1].UUID != all.GPUs[3].UUID {
		t.Fatalf("GPUs = %+v, want indices 1 and 3", rec.GPUs)
	}
	if rec.CUDAVisibleDevices == nil || *rec.CUDAVisibleDevices != env["CUDA_VISIBLE_DEVICES"] || rec.Digest == all.Digest {
		t.Errorf("record does not say what it saw: %v, digest %s", rec.CUDAVisibleDevices, rec.Digest)
	}
	// A step that names GPU 0 (not in this record) is not matched to GPU 1.
	if _, err := rec.Visible(func(k string) (string, bool) {
		return map[string]string{"CUDA_VISIBLE_DEVICES": "0"}[k], k == "CUDA_VISIBLE_DEVICES"
	}); err == nil {
		t.Error("index 0 resolved in a record without GPU 0")
	}
	// Unset: every GPU.
	same, err := Collect(t.Context(), WithFakeGPU("h100:4"), WithVisibleDevices(func(string) (string, bool) { return "", false }))
	if err != nil || len(same.GPUs) != 4 || same.Digest != all.Digest {
		t.Errorf("unset CUDA_VISIBLE_DEVICES changed the record: %v %+v", err, same)
	}
}

// TestCollectUnopenableGPU: a GPU NVML lists but cannot open is recorded
// with its error instead of failing the collection (which aborted every
// run, CPU pipelines included).
func TestCollectUnopenableGPU(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "a100:3")
	s.SetOpenError(0, nvml.ERROR_NO_PERMISSION)
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatalf("collection failed: %v", err)
	}
	if len(rec.GPUs) != 3 || rec.GPUs[0].Error != "opening GPU 0: no permission (NVML 4)" || rec.GPUs[0].UUID != "" || rec.GPUs[1].Error != "" {
		t.Errorf("GPUs = %+v", rec.GPUs)
	}
	if rec.Model() != rec.GPUs[1].Name || rec.Model() == "" {
		t.Errorf("model = %q, want the first opened GPU's", rec.Model())
	}
	live, err := Probe(t.Context(), s)
	if err != nil || live.GPUs[0].Error == "" || live.GPUs[1].Error != "" {
		t.Errorf("probe: %v %+v", err, live)
	}
	tel, err := StartTelemetry(t.Context(), s, filepath.Join(t.TempDir(), "t.jsonl"), time.Second)
	if err != nil {
		t.Fatalf("telemetry: %v", err)
	}
	sum, err := tel.Stop()
	if err != nil || len(sum.GPUs) != 2 || !strings.Contains(strings.Join(sum.Notes, "\n"), "gpu 0 not watched: opening it: no permission") {
		t.Errorf("telemetry: %v, gpus %+v, notes %q", err, sum.GPUs, sum.Notes)
	}
}

// TestCUDADriverVersionV2: the record's CUDA driver version comes from
// nvmlSystemGetCudaDriverVersion_v2 (libcuda's own) where the library has
// it, and from the original call otherwise.
func TestCUDADriverVersionV2(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100")
	s.server.SystemGetCudaDriverVersion_v2Func = func() (int, nvml.Return) { return 12080, nvml.SUCCESS }
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil || rec.CUDADriverVersion != "12.8" {
		t.Errorf("cuda_driver_version = %q, %v; want 12.8 from the _v2 call", rec.CUDADriverVersion, err)
	}
	s.server.LookupSymbolFunc = func(name string) error {
		if name == "nvmlSystemGetCudaDriverVersion_v2" {
			return errors.New("undefined symbol")
		}
		return nil
	}
	rec, err = Collect(t.Context(), WithSource(s))
	if err != nil || rec.CUDADriverVersion != "12.4" {
		t.Errorf("without _v2: cuda_driver_version = %q, %v; want 12.4", rec.CUDADriverVersion, err)
	}
}
