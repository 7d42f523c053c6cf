package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockBytes is the range locked: all of any file this package locks (the
// lock files are empty; the range may lie beyond the end).
const lockBytes = ^uint32(0)

// tryLock takes an exclusive LockFileEx lock on f without waiting. It
// returns false and no error when another handle holds it. Like flock,
// the lock belongs to the handle: two handles of one process exclude
// each other.
func tryLock(f *os.File) (bool, error) {
	ol := new(windows.Overlapped)
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, lockBytes, lockBytes, ol)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION), errors.Is(err, windows.ERROR_IO_PENDING):
		return false, nil
	}
	return false, err
}

// unlockFile releases f's lock.
func unlockFile(f *os.File) {
	_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, lockBytes, lockBytes, new(windows.Overlapped))
}
