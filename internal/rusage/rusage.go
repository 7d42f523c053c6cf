package rusage

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// Usage is what one call of a command cost.
type Usage struct {
	// Exit is the exit status; -1 when a signal ended the process.
	Exit int
	// Signal is the signal that ended the process, or 0.
	Signal syscall.Signal
	// Wall is the time from start to exit.
	Wall time.Duration
	// CPU is user plus system CPU time of the child and the descendants
	// it waited for.
	CPU time.Duration
	// MaxRSS is the peak resident set size in KiB.
	MaxRSS int64
}

// Run runs argv in dir with env (nil: this process's environment) and
// returns its usage and its combined output. The error is set only when
// the command could not be started or waited for; a non-zero exit is a
// Usage, not an error. ctx kills the process when done.
func Run(ctx context.Context, dir string, env []string, argv ...string) (Usage, []byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Usage{}, nil, err
	}
	return Wait(cmd, start), out.Bytes(), nil
}

// Wait waits for a started command and returns its usage, with the wall
// time counted from start.
func Wait(cmd *exec.Cmd, start time.Time) Usage {
	err := cmd.Wait()
	u := Usage{Wall: time.Since(start), Exit: -1}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && cmd.ProcessState == nil {
		return u
	}
	u.Exit = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		u.Signal = ws.Signal()
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.MaxRSS = ru.Maxrss
	}
	return u
}
