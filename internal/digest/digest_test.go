package digest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("abc"), 0o644)
	sum, n, err := File(p)
	if err != nil || n != 3 || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("File = %s %d %v", sum, n, err)
	}
	if _, _, err := File(p + ".missing"); err == nil {
		t.Fatal("missing file hashed")
	}
}
