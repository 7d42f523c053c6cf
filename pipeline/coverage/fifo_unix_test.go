//go:build unix

package coverage

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadFileFIFO: a step that leaves a FIFO where its coverage report
// should be gets "not a regular file", never a read that waits for a
// writer that does not come.
func TestReadFileFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "cov.info")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(fifo, "cov.info")
		done <- err
	}()
	select {
	case err := <-done:
		var e *Error
		if !errors.As(err, &e) || e.Msg != "not a regular file" {
			t.Fatalf("ReadFile(FIFO) = %v, want a positioned \"not a regular file\"", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ReadFile blocked on the FIFO")
	}
}
