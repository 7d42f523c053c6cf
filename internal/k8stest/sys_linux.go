package k8stest

import "syscall"

// groupAttr starts a process in its own process group, killed with the
// test binary if that dies first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends sig to the process group pid leads.
func killGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
