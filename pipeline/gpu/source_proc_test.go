package gpu

import (
	"errors"
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
