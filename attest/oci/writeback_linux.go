package oci

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f from off
// to disk without waiting for them (sync_file_range,
// SYNC_FILE_RANGE_WRITE). It is only a hint: where it fails, the fsync at
// the end still writes everything.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
