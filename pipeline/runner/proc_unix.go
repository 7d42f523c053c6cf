//go:build unix && !linux

package runner

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// ownGroup starts cmd in its own process group, so that cancelling kills
// the whole tree. Outside Linux there is no parent-death signal: a child
// outlives a gpuattest killed by SIGKILL (dieWithParent is not kept).
func ownGroup(cmd *exec.Cmd, dieWithParent bool) {
	_ = dieWithParent
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends SIGTERM (SIGKILL when kill) to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pgid, sig)
}

// maxRSSBytes is the peak resident set of a process that has exited:
// ru_maxrss is in bytes on macOS and in KiB on the BSDs.
func maxRSSBytes(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}
