package regfile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/regfile"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := regfile.ReadFile(t.Context(), p, 5)
	if err != nil || string(b) != "hello" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	sum, n, err := regfile.SHA256(t.Context(), p)
	if err != nil || n != 5 || sum != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Errorf("SHA256 = %s %d %v", sum, n, err)
	}
	_, err = regfile.ReadFile(t.Context(), p, 4)
	var tl *regfile.TooLargeError
	if !errors.As(err, &tl) || tl.Size != 5 || !strings.Contains(err.Error(), "5 B, more than the limit of 4 B") {
		t.Errorf("over the limit: err = %v", err)
	}
	if _, err := regfile.ReadFile(t.Context(), dir, 10); !errors.Is(err, regfile.ErrNotRegular) || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("directory: err = %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := regfile.ReadFile(t.Context(), empty, 10); err != nil || len(b) != 0 {
		t.Errorf("empty file: %q, %v", b, err)
	}
}

// TestFIFO: a FIFO is refused at once, not waited on.
func TestFIFO(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := regfile.SHA256(context.Background(), p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, regfile.ErrNotRegular) || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SHA256 blocked on a FIFO")
	}
}

// TestSHA256Cancelled: hashing a large file stops when ctx is done.
func TestSHA256Cancelled(t *testing.T) {
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
	_, _, err = regfile.SHA256(ctx, p)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("hashing went on for %s after the cancel", took)
	}
}

func TestSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{300: "300 B", 1536: "1.5 KiB", 16 << 20: "16 MiB", 10_000_000: "9.5 MiB", 1 << 40: "1 TiB"} {
		if got := regfile.Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
