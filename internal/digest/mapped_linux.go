//go:build linux

package digest

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// Mapped hashing: a file of at least minMapped bytes is hashed a window
// at a time where the kernel maps it, populated up front, so no byte is
// copied; at most one window is mapped at once.
const (
	minMapped = 1 << 20
	window    = 4 << 20
)

// errShrank is the error for a file cut short while it was hashed.
var errShrank = errors.New("the file shrank while it was hashed")

// afterMap, when set (by tests), is called after each window is mapped.
var afterMap func()

// hashMapped writes into h the mapped windows of f, from its start, and
// returns how many bytes they held, with f's offset moved past them. It
// maps nothing (0, nil) where the file is small or cannot be mapped; the
// caller reads the rest. A file cut short under it is an error, not a
// crash.
func hashMapped(ctx context.Context, h hash.Hash, f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil || st.Size() < minMapped {
		return 0, nil
	}
	var off int64
	for off < st.Size() {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n := min(window, st.Size()-off)
		b, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			break // read the rest
		}
		if afterMap != nil {
			afterMap()
		}
		err = hashWindow(h, b)
		if uerr := unix.Munmap(b); err == nil && uerr != nil {
			err = fmt.Errorf("unmapping: %w", uerr)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f.Name(), err)
		}
		off += n
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return off, nil
}

// hashWindow writes b into h. A fault on b (the file was truncated
// after b was mapped: SIGBUS) is errShrank.
func hashWindow(h hash.Hash, b []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = errShrank
		}
	}()
	h.Write(b)
	return nil
}
