package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/internal/tinyimage"
	"github.com/gpuattest/gpuattest/pipeline/image"
)

// TestBwrapEnvOffTheCommandLine (issue 30, item 6): while a step runs
// under bwrap, sandboxed (the fleet node, rebuild) or in an image
// (runner: bwrap), no process's command line holds a value of its
// environment, and another user (nobody) reading the command line and
// environment of every process finds none either; the step itself sees
// the value.
func TestBwrapEnvOffTheCommandLine(t *testing.T) {
	testenv.RequireTool(t, "bwrap")
	t.Run("sandbox", func(t *testing.T) {
		root := t.TempDir()
		s, err := NewSandbox([]string{root})
		if err != nil {
			t.Fatal(err)
		}
		checkEnvUnreadable(t, s, image.Pinned{}, root)
	})
	t.Run("bwrap runner", func(t *testing.T) {
		archive := filepath.Join(t.TempDir(), "tiny.tar")
		config := tinyimage.WriteDockerArchive(t, archive)
		ref, err := image.ParsePinned("docker-archive:" + archive + "@" + config)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewBwrap(WithBwrapCacheDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		checkEnvUnreadable(t, b, ref, t.TempDir())
	})
}

// checkEnvUnreadable runs a step with a secret in its environment
// through r in dir and, while it waits, reads /proc.
func checkEnvUnreadable(t *testing.T, r Runner, ref image.Pinned, dir string) {
	t.Helper()
	secret := "gpuattest-secret-" + randomHex(8)
	fifo := filepath.Join(dir, "release")
	mkfifo(t, fifo)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	type ran struct {
		res *Result
		err error
	}
	done := make(chan ran, 1)
	var stderr bytes.Buffer
	go func() {
		// dash builtins only (the tiny image has nothing else): say it
		// started, then block until the test opens the FIFO.
		res, err := r.Run(ctx, &Command{Args: []string{"sh", "-c", `printf '%s' "$HF_TOKEN" > seen; read x < release || :`}, Dir: dir,
			Env: []string{"PATH=/usr/bin:/bin", "HF_TOKEN=" + secret}, Image: ref, Stderr: &stderr})
		done <- ran{res, err}
	}()
	seen := filepath.Join(dir, "seen")
	for {
		if b, err := os.ReadFile(seen); err == nil && string(b) == secret {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the step ended before it was read: %+v %v\n%s", r.res, r.err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}

	// Every command line, as this user.
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	sawBwrap := false
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		sawBwrap = sawBwrap || bytes.Contains(b, []byte("--unshare-all"))
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("/proc/%s/cmdline holds the step's secret: %q", e.Name(), strings.ReplaceAll(string(b), secret, "<SECRET>"))
		}
	}
	if !sawBwrap {
		t.Error("no process with --unshare-all on its command line: bwrap was not found in /proc, so the check proved nothing")
	}

	// Every command line and environment, as nobody.
	if os.Getuid() != 0 {
		t.Log("not root: the read as another user (setpriv --reuid=nobody) is left out")
	} else if setpriv, err := exec.LookPath("setpriv"); err != nil {
		t.Logf("no setpriv: the read as another user is left out: %v", err)
	} else {
		out, err := exec.CommandContext(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c",
			"cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null; exit 0").Output()
		if err != nil {
			t.Fatalf("reading /proc as nobody: %v", err)
		}
		if !bytes.Contains(out, []byte("--unshare-all")) {
			t.Error("nobody read no bwrap command line: the check proved nothing")
		}
		if bytes.Contains(out, []byte(secret)) {
			t.Error("user nobody read the step's secret from /proc")
		}
	}

	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	res := <-done
	if res.err != nil || res.res.ExitCode != 0 {
		if !errors.Is(res.err, context.Canceled) {
			t.Fatalf("the step: %+v %v\n%s", res.res, res.err, stderr.String())
		}
	}
}
