//go:build linux && cgo

package gpu

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/hardware"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/pipeline"
)

// preflight collects a record and a live probe from a simulated machine
// after mutate has changed it, and runs Preflight.
func preflight(t *testing.T, spec string, mutate func(*Simulated), pf *pipeline.Preflight, code []string, memory string) []Check {
	t.Helper()
	s := mustSimulate(t, spec)
	if mutate != nil {
		mutate(s)
	}
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatal(err)
	}
	live, err := Probe(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	checks, err := Preflight(rec, pf, code, sizeOf(memory), live)
	if err != nil {
		t.Fatal(err)
	}
	return checks
}

func findCheck(t *testing.T, checks []Check, name string, gpu int) Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name && (c.GPU == nil || *c.GPU == gpu) {
			return c
		}
	}
	t.Fatalf("no %s check for gpu %d in %+v", name, gpu, checks)
	return Check{}
}

// A GPU of a model without floors (pipeline/floors) is warned about,
// "no floor: not judged", and fails preflight with requireFloors; a
// known model passes, naming its floors.
func TestPreflightFloors(t *testing.T) {
	t.Parallel()
	rec := &hardware.Record{GPUs: []hardware.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3"}, {Index: 1, Name: "NVIDIA Hypothetical X1"}}}
	for _, require := range []bool{false, true} {
		checks, err := Preflight(rec, &pipeline.Preflight{RequireFloors: require}, nil, pipeline.Size{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c := findCheck(t, checks, CheckFloors, 0); c.Status != CheckPassed || !strings.Contains(c.Message, "floors of H100 SXM: power 85 % of the limit, memory bandwidth 2345 GB/s, tensor fp16 396 TFLOP/s") {
			t.Errorf("H100: %+v", c)
		}
		c := findCheck(t, checks, CheckFloors, 1)
		want := map[bool]CheckStatus{false: CheckWarned, true: CheckFailed}[require]
		if c.Status != want || !strings.Contains(c.Message, "NVIDIA Hypothetical X1 has no floors") || !strings.Contains(c.Message, "no floor: not judged") ||
			(require && !strings.Contains(c.Message, "requireFloors fails it")) {
			t.Errorf("requireFloors %v: %+v; want %s", require, c, want)
		}
		if err := Err(checks); (err != nil) != require {
			t.Errorf("requireFloors %v: Err = %v", require, err)
		}
	}
}

func TestPreflightPass(t *testing.T) {
	t.Parallel()
	yes := true
	pf := &pipeline.Preflight{MinDriver: "535.104.05", RequireECC: &yes, RequirePersistence: true}
	checks := preflight(t, "h100:2", nil, pf, BuildCode([]string{"sm_80", "sm_90"}, true), "8GiB")
	if err := Err(checks); err != nil {
		t.Fatalf("preflight failed on a healthy simulated H100: %v", err)
	}
	var got []string
	for _, c := range checks {
		g := "-"
		if c.GPU != nil {
			g = strconv.Itoa(*c.GPU)
		}
		got = append(got, c.Name+"/"+string(c.Status)+"/"+g)
	}
	want := []string{
		"gpu/warned/-", "driver/passed/-",
		"compute-capability/passed/0", "ecc/passed/0", "row-remap/passed/0", "mig/passed/0", "floors/passed/0", "fabric/passed/0", "processes/passed/0", "memory/passed/0", "persistence/passed/0",
		"compute-capability/passed/1", "ecc/passed/1", "row-remap/passed/1", "mig/passed/1", "floors/passed/1", "fabric/passed/1", "processes/passed/1", "memory/passed/1", "persistence/passed/1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	if c := findCheck(t, checks, CheckComputeCapability, 0); c.Message != "compute-capability: gpu 0 (NVIDIA H100 80GB HBM3): sm_90 SASS on cc 9.0 [simulated]" {
		t.Errorf("message = %q", c.Message)
	}
	if c := findCheck(t, checks, CheckGPU, 0); !strings.Contains(c.Message, "simulated") {
		t.Errorf("gpu check does not say simulated: %q", c.Message)
	}
}

func TestPreflightFailures(t *testing.T) {
	t.Parallel()
	yes := true
	tests := []struct {
		name    string
		spec    string
		mutate  func(*Simulated)
		pf      pipeline.Preflight
		code    []string
		memory  string
		check   string
		want    CheckStatus
		wantMsg string
	}{
		{
			name: "driver too old", spec: "h100", pf: pipeline.Preflight{MinDriver: "560.28"},
			check: CheckDriver, want: CheckFailed, wantMsg: "driver: seen 550.54.15, required >= 560.28",
		},
		{
			name: "sm_90 only on A100", spec: "a100", code: []string{"sm_90"},
			check: CheckComputeCapability, want: CheckFailed, wantMsg: "seen cc 8.0, required a GPU that runs sm_90",
		},
		{
			name: "sm_80 SASS on cc 8.6", spec: "a100", code: []string{"sm_80"},
			mutate: func(s *Simulated) {
				s.Device(0).GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 8, 6, nvml.SUCCESS }
			},
			check: CheckComputeCapability, want: CheckPassed, wantMsg: "sm_80 SASS runs on 8.6 via binary compatibility",
		},
		{
			name: "sm_80 with PTX on H100 is JIT", spec: "h100", code: BuildCode([]string{"sm_75", "sm_80"}, true),
			check: CheckComputeCapability, want: CheckWarned, wantMsg: "PTX compute_80 will be JIT-compiled",
		},
		{
			name: "sm_90a does not run on a later minor", spec: "h100", code: []string{"sm_90a"},
			mutate: func(s *Simulated) {
				s.Device(0).GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 9, 1, nvml.SUCCESS }
			},
			check: CheckComputeCapability, want: CheckFailed, wantMsg: "seen cc 9.1, required a GPU that runs sm_90a",
		},
		{
			name: "ecc disabled", spec: "h100", pf: pipeline.Preflight{RequireECC: &yes},
			mutate: func(s *Simulated) {
				s.Device(0).GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
					return nvml.FEATURE_DISABLED, nvml.FEATURE_DISABLED, nvml.SUCCESS
				}
			},
			check: CheckECC, want: CheckFailed, wantMsg: "ecc: gpu 0 (NVIDIA H100 80GB HBM3): seen disabled, required enabled",
		},
		{
			name: "ecc disabled, not required", spec: "h100",
			mutate: func(s *Simulated) {
				s.Device(0).GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
					return nvml.FEATURE_DISABLED, nvml.FEATURE_DISABLED, nvml.SUCCESS
				}
			},
			check: CheckECC, want: CheckWarned, wantMsg: "ECC disabled (not required)",
		},
		{
			name: "page retirement pending", spec: "h100",
			mutate: func(s *Simulated) {
				s.Device(0).GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
			},
			check: CheckRetiredPages, want: CheckFailed, wantMsg: "seen page retirement pending (reboot or reset the GPU), required none pending",
		},
		{
			name: "row remap failure", spec: "h100", mutate: func(s *Simulated) { s.SetRemapFailure(0, true) },
			check: CheckRowRemap, want: CheckFailed, wantMsg: "seen a row-remap failure",
		},
		{
			name: "mig enabled", spec: "a100", mutate: func(s *Simulated) { s.Device(0).SetMigMode(nvml.DEVICE_MIG_ENABLE) },
			check: CheckMIG, want: CheckFailed, wantMsg: "seen MIG enabled, required disabled",
		},
		{
			name: "mig enabled, allowed", spec: "a100", pf: pipeline.Preflight{AllowMIG: true},
			mutate: func(s *Simulated) { s.Device(0).SetMigMode(nvml.DEVICE_MIG_ENABLE) },
			check:  CheckMIG, want: CheckWarned, wantMsg: "MIG enabled (allowed)",
		},
		{
			name: "other process", spec: "h100", mutate: func(s *Simulated) { s.AddProcess(0, 4242, 2<<30) },
			check: CheckProcesses, want: CheckFailed, wantMsg: "seen 1 other compute process(es): pid 4242 (2 GiB), required none",
		},
		{
			name: "other process, allowed", spec: "h100", pf: pipeline.Preflight{AllowOtherProcess: true},
			mutate: func(s *Simulated) { s.AddProcess(0, 4242, 2<<30) },
			check:  CheckProcesses, want: CheckWarned, wantMsg: "(allowed)",
		},
		{
			name: "not enough free memory", spec: "h100", memory: "8GiB",
			mutate: func(s *Simulated) { s.AddProcess(0, 7, 75<<30) },
			check:  CheckMemory, want: CheckFailed, wantMsg: "memory: gpu 0 (NVIDIA H100 80GB HBM3): seen 4.99 GiB free, required >= 8 GiB free (the step declares memory: 8GiB)",
		},
		{
			name: "more than the GPU has", spec: "a100", memory: "48GiB",
			check: CheckMemory, want: CheckFailed, wantMsg: "required >= 48 GiB free",
		},
		{
			name: "persistence off", spec: "h100", pf: pipeline.Preflight{RequirePersistence: true},
			mutate: func(s *Simulated) {
				s.Device(0).GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
			},
			check: CheckPersistence, want: CheckFailed, wantMsg: "persistence: gpu 0 (NVIDIA H100 80GB HBM3): seen disabled, required enabled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pf := tt.pf
			checks := preflight(t, tt.spec, tt.mutate, &pf, tt.code, tt.memory)
			c := findCheck(t, checks, tt.check, 0)
			if c.Status != tt.want || !strings.Contains(c.Message, tt.wantMsg) {
				t.Errorf("%s check = %s %q, want %s containing %q", tt.check, c.Status, c.Message, tt.want, tt.wantMsg)
			}
			if !strings.HasPrefix(c.Message, tt.check+":") || !strings.HasSuffix(c.Message, "[simulated]") {
				t.Errorf("message %q does not name the check and say simulated", c.Message)
			}
			err := Err(checks)
			if (err != nil) != (tt.want == CheckFailed) {
				t.Errorf("Err = %v, want failure %v", err, tt.want == CheckFailed)
			}
			if err != nil && !strings.Contains(err.Error(), c.Message) {
				t.Errorf("Err %q does not carry %q", err, c.Message)
			}
		})
	}
}

func TestPreflightNoGPU(t *testing.T) {
	t.Parallel()
	rec := &hardware.Record{GPUs: []hardware.GPU{}, Reason: "NVIDIA driver not loaded"}
	checks, err := Preflight(rec, nil, []string{"sm_90"}, pipeline.MustSize("1GiB"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Check{{Name: CheckGPU, Status: CheckFailed, Seen: "no GPU", Required: "at least one GPU",
		Message: "gpu: seen no GPU (NVIDIA driver not loaded), required at least one GPU"}}
	if diff := cmp.Diff(want, checks); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPreflightWithoutLive(t *testing.T) {
	t.Parallel()
	rec, err := Collect(t.Context(), WithFakeGPU("h100"))
	if err != nil {
		t.Fatal(err)
	}
	checks, err := Preflight(rec, nil, nil, pipeline.MustSize("8GiB"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := findCheck(t, checks, CheckMemory, 0); c.Status != CheckWarned || !strings.Contains(c.Message, "free memory not probed") {
		t.Errorf("memory = %+v", c)
	}
	if c := findCheck(t, checks, CheckProcesses, 0); c.Status != CheckWarned {
		t.Errorf("processes = %+v", c)
	}
}

func TestPreflightGPUChanged(t *testing.T) {
	t.Parallel()
	rec, err := Collect(t.Context(), WithFakeGPU("h100"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := Probe(t.Context(), mustSimulate(t, "h200"))
	if err != nil {
		t.Fatal(err)
	}
	checks, err := Preflight(rec, nil, nil, pipeline.Size{}, live)
	if err != nil {
		t.Fatal(err)
	}
	if err := Err(checks); err == nil || !strings.Contains(err.Error(), "changed since the hardware record was taken") {
		t.Errorf("Err = %v, want a changed-GPU failure", err)
	}
}

func TestPreflightBadInput(t *testing.T) {
	t.Parallel()
	rec := &hardware.Record{GPUs: []hardware.GPU{}}
	_, err := Preflight(rec, &pipeline.Preflight{MinDriver: "r550"}, []string{"sm90", "sm_90"}, pipeline.Size{}, nil)
	if err == nil {
		t.Fatal("no error for bad input")
	}
	for _, want := range []string{`preflight.minDriver: "r550": expected a driver version`, `targets: target "sm90": expected sm_XY`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestBuildCode(t *testing.T) {
	t.Parallel()
	if diff := cmp.Diff([]string{"sm_80", "sm_90", "compute_90"}, BuildCode([]string{"sm_80", "sm_90"}, true)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"sm_80"}, BuildCode([]string{"sm_80"}, false)); diff != "" {
		t.Error(diff)
	}
}

// TestBuildCodePTXIsPortable: the PTX embedded for the highest target is
// plain compute_XY, also when that target is architecture-specific
// (compute_100a PTX runs on no later GPU), as cuda-build embeds it.
func TestBuildCodePTXIsPortable(t *testing.T) {
	t.Parallel()
	if diff := cmp.Diff([]string{"sm_90a", "sm_100a", "sm_80", "compute_100"}, BuildCode([]string{"sm_90a", "sm_100a", "sm_80"}, true)); diff != "" {
		t.Error(diff)
	}
}

// sizeOf is the step memory of a test case; "" leaves it out.
func sizeOf(memory string) pipeline.Size {
	if memory == "" {
		return pipeline.Size{}
	}
	return pipeline.MustSize(memory)
}

// TestPreflightLostGPU: a GPU lost after the record was taken fails
// preflight instead of passing with its live values missing.
func TestPreflightLostGPU(t *testing.T) {
	t.Parallel()
	s := mustSimulate(t, "h100:2")
	rec, err := Collect(t.Context(), WithSource(s))
	if err != nil {
		t.Fatal(err)
	}
	s.SetLost(1, nvml.ERROR_GPU_IS_LOST)
	live, err := Probe(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	checks, err := Preflight(rec, nil, nil, sizeOf("1GiB"), live)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range checks {
		if c.Name == CheckGPU && c.GPU != nil && *c.GPU == 1 {
			found = c.Status == CheckFailed && strings.Contains(c.Message, "GPU is lost (NVML 15)") && strings.Contains(c.Message, "the GPU ("+simUUID("h100", 1)+") lost")
		}
	}
	if !found {
		t.Errorf("no failed gpu check naming the lost GPU 1 in %+v", checks)
	}
	for _, c := range checks {
		if c.GPU != nil && *c.GPU == 0 && c.Status == CheckFailed {
			t.Errorf("healthy gpu 0 failed: %+v", c)
		}
	}
}

// TestPreflightRemapPendingAndRecovery: a pending row remapping and a
// recovery action other than none fail preflight (before, GetRemappedRows'
// pending flag was dropped and the recovery action never read).
func TestPreflightRemapPendingAndRecovery(t *testing.T) {
	t.Parallel()
	checks := preflight(t, "h100:2", func(s *Simulated) {
		s.SetRemapPending(0, true)
		s.SetRecoveryAction(1, nvml.GPU_RECOVERY_ACTION_GPU_RESET)
		s.SetRecoveryAction(0, nvml.GPU_RECOVERY_ACTION_NONE)
	}, nil, nil, "")
	var failed []string
	for _, c := range checks {
		if c.Status == CheckFailed {
			failed = append(failed, c.Message)
		}
	}
	want := []string{
		"row-remap: gpu 0 (NVIDIA H100 80GB HBM3): seen a row remapping pending: a faulty memory row is not yet replaced (hint: reset the GPU with nvidia-smi -r -i 0, or reboot), required none pending [simulated]",
		"recovery-action: gpu 1 (NVIDIA H100 80GB HBM3): the driver asks for recovery action gpu_reset (NVML GET_GPU_RECOVERY_ACTION), required none (hint: carry it out, then run again) [simulated]",
	}
	if diff := cmp.Diff(want, failed); diff != "" {
		t.Errorf("failed checks (-want +got):\n%s", diff)
	}
}

// TestPreflightFabricNotReady: an HGX GPU whose NVSwitch fabric
// registration has not completed (or failed) fails preflight with "fabric
// manager not ready"; a GPU that reports no fabric (A100 here) has no
// fabric check.
func TestPreflightFabricNotReady(t *testing.T) {
	t.Parallel()
	checks := preflight(t, "h100:3", func(s *Simulated) {
		s.SetFabricState(0, nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.SUCCESS)
		s.SetFabricState(1, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.ERROR_TIMEOUT)
	}, nil, nil, "")
	var got []string
	for _, c := range checks {
		if c.Name == CheckFabric {
			got = append(got, c.Message)
		}
	}
	want := []string{
		"fabric: gpu 0 (NVIDIA H100 80GB HBM3): fabric manager not ready: the GPU's NVSwitch fabric registration is not started (CUDA fails with CUDA_ERROR_SYSTEM_NOT_READY until it completes) (hint: systemctl status nvidia-fabricmanager) [simulated]",
		"fabric: gpu 1 (NVIDIA H100 80GB HBM3): fabric manager not ready: the GPU's NVSwitch fabric registration failed: timeout (NVML 10) (hint: journalctl -u nvidia-fabricmanager) [simulated]",
		"fabric: gpu 2 (NVIDIA H100 80GB HBM3): seen completed, required completed [simulated]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fabric checks (-want +got):\n%s", diff)
	}
	for _, c := range preflight(t, "a100", nil, nil, nil, "") {
		if c.Name == CheckFabric {
			t.Errorf("a100 got a fabric check: %+v", c)
		}
	}
}

// A GPU in compute mode PROHIBITED fails preflight by name (before, the
// step ran and the harness failed on it with a CUDA error); a GPU without
// persistence mode is warned about unless the pipeline requires it.
func TestPreflightComputeModeAndPersistence(t *testing.T) {
	t.Parallel()
	checks := preflight(t, "h100:2", func(s *Simulated) {
		s.SetComputeMode(1, nvml.COMPUTEMODE_PROHIBITED)
		s.Device(0).GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
	}, nil, nil, "")
	if c := findCheck(t, checks, CheckComputeMode, 1); c.Status != CheckFailed || !strings.Contains(c.Message, "compute mode PROHIBITED") || !strings.Contains(c.Message, "nvidia-smi -i 1 -c DEFAULT") {
		t.Errorf("gpu 1 compute mode: %+v", c)
	}
	if c := findCheck(t, checks, CheckPersistence, 0); c.Status != CheckWarned || !strings.Contains(c.Message, "nvidia-smi -pm 1") {
		t.Errorf("gpu 0 persistence: %+v", c)
	}
	for _, c := range checks {
		// gpu 1 has persistence on; gpu 0 is in the default compute mode.
		if c.GPU != nil && (c.Name == CheckPersistence && *c.GPU == 1 || c.Name == CheckComputeMode && *c.GPU == 0) {
			t.Errorf("unexpected check: %+v", c)
		}
	}
}

// A GPU that must JIT-compile the build's PTX fails when the toolkit that
// wrote the PTX is newer than the driver's CUDA version (the driver
// cannot load it); an older or equal toolkit, or an unknown one, warns.
func TestPreflightPTXNewerThanDriver(t *testing.T) {
	t.Parallel()
	code := []string{"sm_80", "compute_80"} // an H100 runs only the PTX
	rec := func(t *testing.T) string {
		s := mustSimulate(t, "h100:2")
		r, err := Collect(t.Context(), WithSource(s))
		if err != nil {
			t.Fatal(err)
		}
		return r.CUDADriverVersion
	}(t)
	drv, _ := parseVersion(rec)
	newer := fmt.Sprintf("%d.%d", drv[0], drv[1]+1)
	for _, tc := range []struct {
		toolkit string
		want    CheckStatus
	}{{newer, CheckFailed}, {rec, CheckWarned}, {"11.8", CheckWarned}, {"", CheckWarned}} {
		s := mustSimulate(t, "h100:2")
		r, err := Collect(t.Context(), WithSource(s))
		if err != nil {
			t.Fatal(err)
		}
		checks, err := Preflight(r, nil, code, pipeline.Size{}, nil, WithToolkit(tc.toolkit))
		if err != nil {
			t.Fatal(err)
		}
		c := findCheck(t, checks, CheckComputeCapability, 1)
		if c.Status != tc.want {
			t.Errorf("toolkit %q on a driver for CUDA %s: %+v, want %s", tc.toolkit, rec, c, tc.want)
		}
		if tc.want == CheckFailed && (!strings.Contains(c.Message, "comes from CUDA "+newer) || !strings.Contains(c.Message, "UNSUPPORTED_PTX_VERSION")) {
			t.Errorf("message %q", c.Message)
		}
	}
	if got := ToolkitRelease(map[string]any{"release": "12.4", "nvcc": "/usr/bin/nvcc"}); got != "12.4" {
		t.Errorf("ToolkitRelease(map) = %q", got)
	}
	if got := ToolkitRelease(struct {
		Release string `json:"release"`
	}{"11.8"}); got != "11.8" {
		t.Errorf("ToolkitRelease(struct) = %q", got)
	}
	if ToolkitRelease(nil) != "" || ToolkitRelease("build machine") != "" {
		t.Error("ToolkitRelease of no toolchain is not empty")
	}
}
