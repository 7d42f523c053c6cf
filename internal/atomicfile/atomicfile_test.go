package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, content := range []string{"one", "two"} {
		if err := Write(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("content %q, %v; want %q", got, err, content)
		}
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("leftover files: %v", entries)
	}
}

func TestWriteNewRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := WriteNew(p, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteNew(p, []byte("other"), 0o600)
	if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("second WriteNew: %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "secret" {
		t.Errorf("content changed to %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftover files: %v", entries)
	}
}

func TestCopyKeepsMode(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "sub", "dst")
	os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755)
	if err := Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("copy: %v %v", st, err)
	}
}

func TestWriteInRootStaysInside(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fill := func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }
	if err := WriteInRoot(root, filepath.Join("a", "b", "f"), 0o640, fill); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "a", "b", "f")); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("written file: %v %v", st, err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := WriteInRoot(root, filepath.Join("out", "f"), 0o644, fill); err == nil {
		t.Error("wrote through a symlink out of the root")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the outside directory holds %v", entries)
	}
}
