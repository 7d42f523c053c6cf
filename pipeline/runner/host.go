package runner

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// Host runs processes directly on this machine, each in its own process
// group so that cancelling kills the whole tree. It provides no isolation.
type Host struct {
	// KillGrace is how long a cancelled process group gets between SIGTERM
	// and SIGKILL; zero means 2 seconds.
	KillGrace time.Duration
	// WaitDelay bounds the waits that have no bound of their own: for the
	// output pipes once the process exited (a process it started that
	// left its group may hold them open) and for the process to exit
	// after SIGKILL (one stuck in an uninterruptible driver call never
	// does); zero means 5 seconds.
	WaitDelay time.Duration
}

var _ Runner = (*Host)(nil)

// Name returns "host".
func (*Host) Name() string { return "host" }

// Info describes the host runner.
func (*Host) Info() Info { return Info{Name: "host", Isolation: "none"} }

// Run starts c.Args in c.Dir with exactly c.Env and waits for it. When ctx
// is done the process group gets SIGTERM, then SIGKILL after KillGrace, and
// Run returns only after the process has exited.
func (h *Host) Run(ctx context.Context, c *Command) (*Result, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("host runner: empty command")
	}
	if !c.Image.IsZero() {
		return nil, fmt.Errorf("host runner: step asks for image %s\nhint: use runner: docker or bwrap to run inside an image", c.Image)
	}
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdout = c.Stdout
	cmd.Stderr = c.Stderr
	waitDelay := h.WaitDelay
	if waitDelay == 0 {
		waitDelay = 5 * time.Second
	}
	cmd.WaitDelay = waitDelay
	// Own process group, so cancelling kills the whole tree; and the child
	// dies with gpuattest even when gpuattest is SIGKILLed.
	ownGroup(cmd, true)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", c.Args[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	grace := h.KillGrace
	if grace == 0 {
		grace = 2 * time.Second
	}
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		pgid := cmd.Process.Pid
		signalGroup(pgid, false)
		select {
		case <-done:
		case <-time.After(grace):
			signalGroup(pgid, true)
			select {
			case <-done:
			case <-time.After(2 * waitDelay):
				// Killed and still there: a process in an uninterruptible
				// call (a hung GPU driver) cannot be reaped; the step's
				// time is up all the same.
				return &Result{ExitCode: -1, Duration: time.Since(start)},
					fmt.Errorf("%s: %w; it did not exit %v after SIGKILL (stuck in an uninterruptible call: a hung GPU driver?) and was left behind", c.Args[0], context.Cause(ctx), 2*waitDelay)
			}
		}
		// Reap anything left in the group.
		signalGroup(pgid, true)
		return &Result{ExitCode: -1, Duration: time.Since(start)}, fmt.Errorf("%s: %w", c.Args[0], context.Cause(ctx))
	}
	res := &Result{Duration: time.Since(start)}
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		// The process exited; something it started left its group and
		// kept its output open.
		res.Notes = append(res.Notes, fmt.Sprintf("%s exited, but a process it started held its output open %v later (it had left the process group): its output after that is not recorded", c.Args[0], waitDelay))
		waitErr = nil
	}
	if waitErr != nil {
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) {
			return nil, fmt.Errorf("waiting for %s: %w", c.Args[0], waitErr)
		}
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	res.MaxRSSBytes = maxRSSBytes(cmd.ProcessState)
	// A process that exits while children of its group still hold the
	// pipes is done; leave no stragglers behind.
	signalGroup(cmd.Process.Pid, true)
	return res, nil
}
