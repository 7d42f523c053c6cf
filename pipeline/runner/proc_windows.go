package runner

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a new process group. Windows has no signal to
// a group and no parent-death signal: cancelling kills the process
// itself (signalGroup), not what it started (dieWithParent is not kept).
func ownGroup(cmd *exec.Cmd, dieWithParent bool) {
	_ = dieWithParent
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// signalGroup terminates the process pid (TerminateProcess: Windows has
// no SIGTERM to send first, so kill or not, it ends now).
func signalGroup(pid int, kill bool) {
	_ = kill
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
		_ = p.Release()
	}
}

// maxRSSBytes is not reported on Windows (0).
func maxRSSBytes(*os.ProcessState) int64 { return 0 }
