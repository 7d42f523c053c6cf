//go:build linux

package digest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFileContextMapped: a file over minMapped, a window and a bit, hashes
// as its bytes do, mapped and read alike.
func TestFileContextMapped(t *testing.T) {
	t.Parallel()
	b := make([]byte, window+minMapped+5)
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

// TestFileContextShrunk: a file truncated after its window was mapped
// (SIGBUS on the pages gone) is an error naming it, not a crash.
// Not parallel: it sets afterMap.
func TestFileContextShrunk(t *testing.T) {
	p := filepath.Join(t.TempDir(), "shrinks")
	if err := os.WriteFile(p, make([]byte, 3*minMapped), 0o644); err != nil {
		t.Fatal(err)
	}
	afterMap = func() {
		if err := os.Truncate(p, 0); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterMap = nil })
	_, _, err := FileContext(t.Context(), p)
	if !errors.Is(err, errShrank) || err.Error() != p+": "+errShrank.Error() {
		t.Fatalf("err = %v, want %s: %v", err, p, errShrank)
	}
}
