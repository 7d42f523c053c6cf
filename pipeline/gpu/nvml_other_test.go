//go:build !(linux && cgo)

package gpu

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestNoNVML: a build without NVML records host facts and why no GPU was
// read, naming the platform, and refuses what needs a GPU.
func TestNoNVML(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH + " without cgo"
	rec, err := Collect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.GPUs) != 0 || rec.Simulated || !strings.Contains(rec.Reason, platform) {
		t.Errorf("record: %d GPUs, simulated %v, reason %q; want none, naming %s", len(rec.GPUs), rec.Simulated, rec.Reason, platform)
	}
	if err := Unsupported(); err == nil || !strings.Contains(err.Error(), platform) {
		t.Errorf("Unsupported() = %v, want an error naming %s", err, platform)
	}
	if _, err := Probe(t.Context(), NVML("")); !errors.Is(err, ErrNoGPU) {
		t.Errorf("Probe: %v, want ErrNoGPU", err)
	}
	if _, err := StartTelemetry(t.Context(), NVML(""), t.TempDir()+"/t.jsonl", DefaultInterval); !errors.Is(err, ErrNoGPU) {
		t.Errorf("StartTelemetry: %v, want ErrNoGPU", err)
	}
	if _, err := SourceFromEnv("h100"); err == nil || !strings.Contains(err.Error(), platform) {
		t.Errorf("SourceFromEnv(h100) = %v, want an error naming %s", err, platform)
	}
}
