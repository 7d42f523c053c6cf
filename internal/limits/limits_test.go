package limits

import (
	"errors"
	"os"
	"path/filepath"
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
}
