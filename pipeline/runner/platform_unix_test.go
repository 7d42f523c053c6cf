//go:build unix

package runner

import (
	"io/fs"
	"syscall"
	"testing"
)

// fileUID returns the owner of fi.
func fileUID(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// mkfifo makes a named pipe at path, readable by its owner only.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}
