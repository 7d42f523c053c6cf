package verify_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/verify"
)

// TestDigestFiles: the files are hashed in the order given, whatever
// order the workers finish in; the error is that of the first path that
// failed for a cause of its own (a FIFO is refused at once, never waited
// on, and a missing file is named), not a cancellation it caused.
func TestDigestFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var paths []string
	want := map[string]string{}
	for i := range 9 {
		p := filepath.Join(dir, strings.Repeat("k", i+1)+".bin")
		b := []byte(strings.Repeat("x", i*100_000))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		paths, want[p] = append(paths, p), hex.EncodeToString(sum[:])
	}
	arts, err := verify.DigestFiles(t.Context(), paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != len(paths) {
		t.Fatalf("%d artifacts for %d paths", len(arts), len(paths))
	}
	for i, a := range arts {
		if a.Name != paths[i] || a.SHA256 != want[paths[i]] {
			t.Errorf("artifact %d: %s %s, want %s %s", i, a.Name, a.SHA256, paths[i], want[paths[i]])
		}
	}
	if arts, err := verify.DigestFiles(t.Context(), nil); err != nil || len(arts) != 0 {
		t.Errorf("no paths: %v, %v", arts, err)
	}

	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	missing := filepath.Join(dir, "missing.bin")
	start := time.Now()
	_, err = verify.DigestFiles(t.Context(), append(append(paths[:4:4], fifo, missing), paths[4:]...))
	if err == nil || !strings.Contains(err.Error(), "fifo") || strings.Contains(err.Error(), "cancel") {
		t.Errorf("a FIFO then a missing file: %v, want the FIFO refused by name", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the FIFO held the digest for %s", d)
	}
	_, err = verify.DigestFiles(t.Context(), append(paths[:2:2], missing, fifo))
	if err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Errorf("a missing file then a FIFO: %v, want the missing file named", err)
	}
}
