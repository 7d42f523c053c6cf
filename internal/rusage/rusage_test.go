package rusage

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestRunReportsExitAndUsage(t *testing.T) {
	u, out, err := Run(t.Context(), t.TempDir(), nil, "sh", "-c", "echo hi; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if u.Exit != 3 || string(out) != "hi\n" {
		t.Errorf("exit %d output %q, want 3 and hi", u.Exit, out)
	}
	if u.CPU <= 0 || u.MaxRSS <= 0 {
		t.Errorf("usage %+v: want CPU and peak RSS measured", u)
	}
}

func TestWaitReportsSignal(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	if u := Wait(cmd, start); u.Exit != -1 || u.Signal != syscall.SIGKILL {
		t.Errorf("usage %+v: want exit -1 by SIGKILL", u)
	}
}

func TestRunMissingCommand(t *testing.T) {
	if _, _, err := Run(t.Context(), "", nil, "/nonexistent/command"); err == nil {
		t.Error("want an error for a command that cannot start")
	}
}
