package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestVerifyInterrupt: SIGINT or SIGTERM stops verify within a second
// with exit 130, whether it is hashing a large artifact or evaluating a
// long policy.
func TestVerifyInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := selfAsGpuattest(t)
	sparse := filepath.Join(dir, "huge.bin")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse 1 TiB file here: %v", err)
	}
	f.Close()
	art := filepath.Join(dir, "k.bin")
	if err := os.WriteFile(art, []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("kernel"))
	var steps []string
	for i := range 20_000 {
		steps = append(steps, fmt.Sprintf(`{"id":"s%d"}`, i))
	}
	payload := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"k","digest":{"sha256":"` + hex.EncodeToString(sum[:]) +
		`"}}],"predicateType":"https://example.com/p/v1","predicate":{"steps":[` + strings.Join(steps, ",") + `]}}`
	pub, bundle := signedFixture(t, dir, []byte(payload))
	bundlePath := filepath.Join(dir, "b.json")
	policyPath := filepath.Join(dir, "slow.yaml")
	if err := os.WriteFile(bundlePath, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policyPath, []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: slow\n    expr: 'predicate.steps.all(s, !predicate.steps.exists(t, t.id == \"none\"))'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"verify", "--bundle", bundlePath, "--key", pub, "--predicate-type", "https://example.com/p/v1"}
	tests := []struct {
		name string
		sig  syscall.Signal
		args []string
	}{
		{"hashing/SIGINT", syscall.SIGINT, append(base, sparse)},
		{"hashing/SIGTERM", syscall.SIGTERM, append(base, sparse)},
		{"policy/SIGINT", syscall.SIGINT, append(base, "--policy", policyPath, "--max-policy-cost", "1000000000000", art)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, tt.args...)
			var out lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Signal once verify has begun, not after a fixed sleep: on a
			// loaded machine a signal sent too early kills the process
			// before gpuattest has installed its handlers. It has begun
			// when it hashes the sparse file (it holds it open) or prints
			// its criteria; both come after the handlers.
			for !strings.Contains(out.String(), "against these criteria") && !holdsOpen(cmd.Process.Pid, sparse) {
				select {
				case werr := <-done:
					t.Fatalf("exited before verifying (%v):\n%s", werr, out.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatalf("signal: %v (exited early? %s)", err, out.String())
			}
			// The work left (hashing 1 TiB, a policy of 4e8 steps) takes
			// minutes; ending within the hang guard with exit 130 shows
			// the signal stopped it. No tighter bound: it would measure
			// the machine's load, not gpuattest.
			var werr error
			select {
			case werr = <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running 30 s after %s:\n%s", tt.sig, out.String())
			}
			var ee *exec.ExitError
			if !errors.As(werr, &ee) || ee.ExitCode() != 130 {
				t.Errorf("exit = %v, want 130:\n%s", werr, out.String())
			}
			if !strings.Contains(out.String(), "interrupted") {
				t.Errorf("output does not say interrupted:\n%s", out.String())
			}
		})
	}
}

// TestVerifyRefusesFIFO: a FIFO (or any non-regular file) as artifact,
// bundle or policy is refused at once, never waited on.
func TestVerifyRefusesFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	pub, bundle := signedFixture(t, dir, []byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"k","digest":{"sha256":"`+strings.Repeat("a", 64)+`"}}],"predicateType":"https://example.com/p/v1","predicate":{}}`))
	bundlePath := filepath.Join(dir, "b.json")
	if err := os.WriteFile(bundlePath, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"verify", "--bundle", bundlePath, "--key", pub, fifo},
		{"verify", "--bundle", fifo, "--key", pub},
		{"verify", "--bundle", bundlePath, "--key", pub, "--policy", fifo},
		{"verify", "--bundle", bundlePath, "--key", fifo},
		{"verify", "--bundle", bundlePath, "--key", pub, dir},
	} {
		type result struct {
			code           int
			stdout, stderr string
		}
		done := make(chan result, 1)
		go func() {
			code, stdout, stderr := runCLI(t, args...)
			done <- result{code, stdout, stderr}
		}()
		select {
		case r := <-done:
			if r.code != 1 || !strings.Contains(r.stderr, "not a regular file") {
				t.Errorf("%v: exit %d, stderr %q", args[1:], r.code, r.stderr)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%v: blocked on the FIFO", args[1:])
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a process's writes and the
// test's reads at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// holdsOpen reports whether process pid has path open (Linux /proc).
func holdsOpen(pid int, path string) bool {
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fds)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}
