package image

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS makes every write to the file system holding dir durable
// (syncfs).
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// startWriteback asks the kernel to start writing f's data to disk now,
// without waiting (sync_file_range SYNC_FILE_RANGE_WRITE, as dpkg does), so
// that the disk writes run beside the extraction and the syncfs that makes
// the root file system durable at the end finds most of them done. It is
// only a hint: where it fails, syncfs still writes everything.
func startWriteback(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _ = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE) })
	}
}
