//go:build !linux

package k8stest

import (
	"os"
	"syscall"
)

// groupAttr is nil: the control plane's binaries are Linux ones, so the
// package builds elsewhere (its users vet on every platform) but its
// processes run only on Linux.
func groupAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the process pid (no process groups here).
func killGroup(pid int, _ syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
