package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/image"
)

func TestHostRunExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "ok", args: []string{"/bin/sh", "-c", "echo hello"}, wantCode: 0, wantOut: "hello\n"},
		{name: "exit 3", args: []string{"/bin/sh", "-c", "exit 3"}, wantCode: 3},
		{name: "env is exact", args: []string{"/bin/sh", "-c", "echo $FOO-$HOME"}, wantCode: 0, wantOut: "bar-\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			res, err := (&Host{}).Run(t.Context(), &Command{Args: tt.args, Dir: t.TempDir(), Env: []string{"FOO=bar"}, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.wantCode {
				t.Errorf("exit code = %d, want %d", res.ExitCode, tt.wantCode)
			}
			if out.String() != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out.String(), tt.wantOut)
			}
		})
	}
}

func TestHostRunMissingBinary(t *testing.T) {
	t.Parallel()
	_, err := (&Host{}).Run(t.Context(), &Command{Args: []string{"/nonexistent/tool"}, Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "starting /nonexistent/tool") {
		t.Fatalf("err = %v, want a start error", err)
	}
}

func TestHostRefusesImage(t *testing.T) {
	t.Parallel()
	img, err := image.ParsePinned("x@sha256:" + strings.Repeat("0", 64))
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&Host{}).Run(t.Context(), &Command{Args: []string{"true"}, Image: img})
	if err == nil || !strings.Contains(err.Error(), "hint:") {
		t.Fatalf("err = %v, want a refusal with a hint", err)
	}
}

// TestHostCancelKillsGroup starts a shell that spawns a grandchild which
// would write a file after 2 s; cancelling must kill both.
func TestHostCancelKillsGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "survived")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := (&Host{KillGrace: 100 * time.Millisecond}).Run(ctx, &Command{
		Args: []string{"/bin/sh", "-c", "(sleep 2; touch " + marker + ") & trap '' TERM; sleep 30"},
		Dir:  dir,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run returned after %v, want prompt return", d)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("grandchild survived cancellation")
	}
}

// The host runner's waits are bounded: a step whose process exits while
// something it started has left its process group (setsid) and holds its
// output open returns within WaitDelay, with a note, instead of waiting
// for the stray process (30 s here; forever for a daemon); so does a
// cancelled one.
func TestHostWaitIsBounded(t *testing.T) {
	t.Parallel()
	for _, cancelled := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		if cancelled {
			time.AfterFunc(200*time.Millisecond, cancel)
		}
		var out bytes.Buffer
		start := time.Now()
		script := "setsid sleep 30 & echo started"
		if cancelled {
			script += "; sleep 30"
		}
		res, err := (&Host{KillGrace: 100 * time.Millisecond, WaitDelay: 500 * time.Millisecond}).Run(ctx, &Command{
			Args: []string{"/bin/sh", "-c", script}, Dir: t.TempDir(), Stdout: &out})
		cancel()
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("cancelled %v: Run returned after %v", cancelled, d)
		}
		switch {
		case cancelled && !errors.Is(err, context.Canceled):
			t.Errorf("cancelled: err = %v", err)
		case !cancelled && (err != nil || res.ExitCode != 0 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "held its output open")):
			t.Errorf("exited: res %+v, err %v; want exit 0 and a note", res, err)
		}
		if !strings.HasPrefix(out.String(), "started") {
			t.Errorf("stdout %q", out.String())
		}
	}
}
