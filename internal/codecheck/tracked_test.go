package codecheck_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// maxTrackedBytes bounds a file in the repository: the largest today is a
// golden samples file of about 150 KB. A built binary committed by
// mistake (a `go build` in the module root writes one named after the
// package) is tens of megabytes and stays in every clone for good.
const maxTrackedBytes = 1 << 20

// TestNoLargeOrBinaryFiles fails when git tracks a file over
// maxTrackedBytes or an executable (ELF) file.
func TestNoLargeOrBinaryFiles(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found")
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for name := range bytes.SplitSeq(bytes.TrimRight(out, "\x00"), []byte{0}) {
		path := filepath.Join(root, string(name))
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if fi.Size() > maxTrackedBytes {
			t.Errorf("%s: %d bytes tracked, more than %d\nhint: generated outputs and binaries belong in .gitignore'd folders (bin/, build/)", name, fi.Size(), maxTrackedBytes)
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		if n == 4 && bytes.Equal(head, []byte("\x7fELF")) {
			t.Errorf("%s: an executable (ELF) is tracked\nhint: build into bin/ (make build) or a temporary directory, never the module root", name)
		}
	}
}
