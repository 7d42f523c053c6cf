//go:build unix

package fleettest

import (
	"os/exec"
	"syscall"
)

// inGroup runs cmd in a process group of its own, which its context's
// end kills whole.
func inGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
