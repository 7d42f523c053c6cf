//go:build !linux

package slurmtest

import (
	"errors"
	"runtime"
	"syscall"
)

// ids are the user and group a daemon runs as.
type ids struct{ uid, gid uint32 }

// errNotLinux: the cluster runs Linux daemons as other users, in their
// own process groups, with device files; it builds elsewhere (so its
// users vet on every platform) but starts nothing.
var errNotLinux = errors.New("slurmtest runs a Slurm cluster only on Linux, not " + runtime.GOOS)

func procAttr(*ids) (*syscall.SysProcAttr, error) { return nil, errNotLinux }

func mknodChar(string, int, int) error { return errNotLinux }
