//go:build !windows

package stagefs

import (
	"io/fs"
	"syscall"
)

// OwnerOf is the uid that owns fi.
func OwnerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// ownersKnown is nil: files have POSIX owners and modes here.
func ownersKnown() error { return nil }
