//go:build unix

package coordinate_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPrepareRefusesFIFOBinary: a FIFO named as a class's gpuattest
// (--node-binary linux/arm64=FIFO, or left by a co-tenant where a
// binary is expected) is refused as not a regular file, at once: nothing
// waits for a writer that never comes.
func TestPrepareRefusesFIFOBinary(t *testing.T) {
	amd := buildFor(t, "amd64")
	_, prepare := stageFixture(t)
	fifo := filepath.Join(t.TempDir(), "gpuattest-linux-arm64")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	const classes = "  - {name: h100, gres: gpu:h100:8, targets: [sm_90]}\n" +
		"  - {name: gh200, gres: gpu:gh200:1, arch: arm64, targets: [sm_90]}\n"
	done := make(chan error, 1)
	go func() {
		_, err := prepare(classes, map[string]string{"linux/amd64": amd, "linux/arm64": fifo})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("prepare with a FIFO as the arm64 gpuattest: %v, want it refused as a FIFO", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("prepare with a FIFO as the arm64 gpuattest still waits after 30 s")
	}
}
