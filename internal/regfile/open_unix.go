//go:build unix

package regfile

import (
	"os"
	"syscall"
)

// openFlags open without blocking on a FIFO; reads from a regular file
// ignore O_NONBLOCK.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
