package k8stest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one component running in the foreground, its output in
// logs/NAME.log under the cluster's directory.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, set before done closes
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group and, after grace, SIGKILL.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = killGroup(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = killGroup(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// spawn starts bin (a file of the binaries' directory) with args.
func (cp *controlPlane) spawn(name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(cp.dir, "logs", name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(filepath.Join(cp.bin, bin), args...)
	cmd.Dir = cp.dir
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that stop reaches anything it forks;
	// killed with the test binary if that dies first.
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	cp.procs = append(cp.procs, p)
	return p, nil
}

// poll calls ready every 100 ms (backing off to 1 s) until it returns nil,
// p exits, or ctx ends; the error says what was awaited and the last
// reason.
func poll(ctx context.Context, what string, p *proc, ready func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("waiting for %s: %s exited (%v); see %s", what, p.name, p.err, p.log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(wait*3/2, time.Second)
	}
}

// freePorts returns n distinct ports free on 127.0.0.1 when asked (a
// component that loses the race to another process fails to start, and
// says so in its log).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last limit bytes of path, from a line's start.
func tail(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(fi.Size()-limit, 0)
	buf := make([]byte, fi.Size()-off)
	if n, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return err.Error()
	} else {
		buf = buf[:n]
	}
	s := string(buf)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}
