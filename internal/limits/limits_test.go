package limits

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCheckYAMLNesting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		src       string
		max       int
		line, col int
	}{
		{"shallow", "a: [1, [2, {b: 3}]]\n", 3, 0, 0},
		{"too deep", "a: [[[[x]]]]\n", 3, 1, 7},
		{"brackets in quotes do not count", "a: \"[[[[\"\nb: '{{{{'\n", 2, 0, 0},
		{"brackets in comments do not count", "a: 1 # [[[[[\n", 2, 0, 0},
		{"an apostrophe in a plain scalar opens no quote", "d: it's\nx: [[[[1]]]]\n", 3, 2, 7},
		{"an unclosed quote in a plain scalar hides nothing", "d: x'\n" + strings.Repeat("[", 10), 5, 2, 6},
		{"escaped quote", "a: \"\\\"[\"\nb: [[[1]]]\n", 2, 2, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, c := CheckYAMLNesting([]byte(tt.src), tt.max)
			if l != tt.line || c != tt.col {
				t.Errorf("got %d:%d, want %d:%d", l, c, tt.line, tt.col)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, 10, "pipeline"); err != nil || string(b) != "0123456789" {
		t.Errorf("at the limit: %q %v", b, err)
	}
	_, err := ReadFile(p, 9, "pipeline")
	var tl *TooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "pipeline larger than 9 bytes") {
		t.Errorf("over the limit: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	// A FIFO with no writer would block a plain open forever.
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo, 10, "results file"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
}

func TestSetSoftMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	SetSoftMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != SoftMemory {
		t.Errorf("memory limit %d, want %d", got, SoftMemory)
	}
	debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "1GiB")
	SetSoftMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != old {
		t.Errorf("with GOMEMLIMIT set: memory limit %d, want it left at %d", got, old)
	}
	debug.SetMemoryLimit(old)
	oldGC := debug.SetGCPercent(100)
	defer debug.SetGCPercent(oldGC)
	t.Setenv("GOGC", "")
	SetSoftMemoryLimit()
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("GC percent %d, want %d", got, GCPercent)
	}
	t.Setenv("GOGC", "50")
	SetSoftMemoryLimit()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GC percent %d, want it left at 100", got)
	}
}

// TestReadFileRefusesLargeFileUnread: found by bench/adversarial. A file
// over the limit was read up to the limit before it was refused (424 MB
// of RSS for a 200 MB bundle file); its size decides first.
func TestReadFileRefusesLargeFileUnread(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ReadFile(p, 64<<20, "bundle file")
	runtime.ReadMemStats(&after)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 64<<20 {
		t.Fatalf("err = %v, want a TooLargeError at 64 MiB", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("refusing allocated %d bytes, want under 1 MiB: the file was read", n)
	}
}
