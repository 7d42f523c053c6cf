package digest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/limits"
)

func TestFileContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, n, err := FileContext(t.Context(), p)
	if err != nil || n != 3 || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("FileContext = %s %d %v", sum, n, err)
	}
	if _, _, err := FileContext(t.Context(), dir); !errors.Is(err, limits.ErrNotRegular) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: err = %v", err)
	}
}

// TestFileContextLarge: a file of several chunks and a bit hashes as its
// bytes do.
func TestFileContextLarge(t *testing.T) {
	t.Parallel()
	b := make([]byte, 5*chunk+5)
	rand.Read(b)
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(b)
	sum, n, err := FileContext(t.Context(), p)
	if err != nil || n != int64(len(b)) || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("FileContext = %s %d %v, want %x %d", sum, n, err, want, len(b))
	}
}

// TestFileContextFIFO: a FIFO is refused at once, not waited on.
func TestFileContextFIFO(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := FileContext(context.Background(), p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, limits.ErrNotRegular) || !strings.Contains(err.Error(), "is a FIFO") {
			t.Errorf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("FileContext blocked on a FIFO")
	}
}

// TestFileContextCancelled: hashing a large file stops when ctx is done.
func TestFileContextCancelled(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse 1 TiB file here: %v", err)
	}
	f.Close()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, _, err := FileContext(ctx, p); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("hashing went on for %s after the cancel", took)
	}
}
