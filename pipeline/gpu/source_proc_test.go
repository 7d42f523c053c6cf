//go:build linux && cgo

package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoDriverProcDir: without the kernel module's /proc directory the
// default NVML source says the driver is not loaded, without loading NVML.
func TestNoDriverProcDir(t *testing.T) {
	old := driverProcDir
	driverProcDir = filepath.Join(t.TempDir(), "no-such-dir")
	t.Cleanup(func() { driverProcDir = old })
	_, _, err := NVML("").Open()
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrNoGPU) {
		t.Fatalf("Open: %v, want an UnavailableError matching ErrNoGPU", err)
	}
	if !strings.Contains(ue.Reason, "NVIDIA driver not loaded") || !strings.Contains(ue.Reason, driverProcDir) {
		t.Errorf("reason %q", ue.Reason)
	}
	rec, err := Collect(t.Context(), WithSource(NVML("")))
	if err != nil || len(rec.GPUs) != 0 || !strings.Contains(rec.Reason, "driver not loaded") {
		t.Errorf("Collect: %+v, %v", rec, err)
	}
}

// TestWSL2IsNotNoDriver: under WSL2 (/dev/dxg, no /proc/driver/nvidia)
// the default source goes on to load NVML instead of saying the driver
// is not loaded; here, without libnvidia-ml, NVML's own answer (library
// not found) is the reason.
func TestWSL2IsNotNoDriver(t *testing.T) {
	oldProc, oldDxg := driverProcDir, wslDevice
	driverProcDir = filepath.Join(t.TempDir(), "no-such-dir")
	wslDevice = filepath.Join(t.TempDir(), "dxg")
	t.Cleanup(func() { driverProcDir, wslDevice = oldProc, oldDxg })
	if err := os.WriteFile(wslDevice, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lib, release, err := NVML("").Open()
	if err == nil {
		release() // a machine with NVML installed: it loaded, as it should
		_ = lib
		return
	}
	var ue *UnavailableError
	if !errors.As(err, &ue) || strings.Contains(ue.Reason, "kernel module is not running") {
		t.Errorf("Open under WSL2: %v, want NVML to be loaded, not \"driver not loaded\"", err)
	}
}
