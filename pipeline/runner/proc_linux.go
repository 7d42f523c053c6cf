package runner

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in its own process group, so that cancelling kills
// the whole tree; with dieWithParent the child is also killed when
// gpuattest dies, even by SIGKILL (PR_SET_PDEATHSIG).
func ownGroup(cmd *exec.Cmd, dieWithParent bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
}

// signalGroup sends SIGTERM (SIGKILL when kill) to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pgid, sig)
}

// maxRSSBytes is the peak resident set of a process that has exited
// (Linux reports ru_maxrss in KiB).
func maxRSSBytes(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
		return ru.Maxrss * 1024
	}
	return 0
}
