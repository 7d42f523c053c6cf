package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// terminal is a pseudo-terminal for a command's stdin and stderr: what the
// command prints there is collected in screen, and type sends keystrokes.
type terminal struct {
	ptmx, tty *os.File
	screen    syncBuffer
	copied    chan struct{}
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("skipping: no pseudo-terminal: %v", err)
	}
	term := &terminal{ptmx: ptmx, tty: tty, copied: make(chan struct{})}
	go func() {
		defer close(term.copied)
		_, _ = io.Copy(&term.screen, ptmx)
	}()
	t.Cleanup(func() {
		tty.Close()
		ptmx.Close()
		<-term.copied
	})
	return term
}

// run runs gpuattest args with stdin and stderr on the terminal and
// returns its exit code and stdout. A command still running after
// timeout is waiting for input nobody types: the test fails, showing
// the screen, and the terminal is closed so that its read returns.
func (term *terminal) run(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- execute(args, term.tty, &stdout, term.tty) }()
	select {
	case code := <-done:
		return code, stdout.String()
	case <-time.After(timeout):
		term.tty.Close()
		<-done
		t.Fatalf("gpuattest %s still running after %v, waiting for input; terminal:\n%q", strings.Join(args, " "), timeout, term.screen.String())
		return 0, ""
	}
}

// unsetPasswords clears the password variables for this test (and
// restores them after it), as in a fresh terminal.
func unsetPasswords(t *testing.T) {
	for _, k := range []string{"GPUATTEST_PASSWORD", "COSIGN_PASSWORD"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// writeStatement writes a small in-toto statement to sign.
func writeStatement(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "statement.json")
	st := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a","digest":{"sha256":"` + strings.Repeat("ab", 32) + `"}}],"predicateType":"https://example.com/p","predicate":{}}`
	if err := os.WriteFile(path, []byte(st), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// noPasswordKey makes a key with --no-password, with stdin and stderr on
// term and no password variable set, outside dir's project, and returns
// the private key's path.
func noPasswordKey(t *testing.T, term *terminal, dir string) string {
	t.Helper()
	key := filepath.Join(dir, "keys", "demo")
	if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out := term.run(t, time.Minute, "key", "generate", "--output-key-prefix", key, "--no-password"); code != 0 {
		t.Fatalf("key generate exited %d: %s\nterminal:\n%q", code, out, term.screen.String())
	}
	return key + ".key"
}

// noPrompt fails when the terminal shows a password prompt.
func noPrompt(t *testing.T, term *terminal) {
	t.Helper()
	if s := term.screen.String(); strings.Contains(s, "Enter password") {
		t.Errorf("the terminal shows a password prompt:\n%q", s)
	}
}

// TestNoPasswordKeyNeverPrompts (issue 22 item 6): a key made with
// --no-password, then sign, with stdin on a terminal and no password
// variable set, finishes with no input, and nothing on the screen asks
// for a password. rebuild --sign-key unlocks its key the same way
// (signFlags.signer, loadPrivateKey).
func TestNoPasswordKeyNeverPrompts(t *testing.T) {
	unsetPasswords(t)
	dir := t.TempDir()
	term := newTerminal(t)
	key := noPasswordKey(t, term, dir)
	if code, out := term.run(t, time.Minute, "sign", "--key", key, writeStatement(t, dir), "-o", filepath.Join(dir, "b.jsonl")); code != 0 {
		t.Fatalf("sign exited %d: %s\nterminal:\n%q", code, out, term.screen.String())
	}
	noPrompt(t, term)
}

// TestRunNoPasswordKeyNeverPrompts is make demo's key generate and run
// --key in a terminal (issue 22 item 6): a real nvcc build, signed at the
// end of the run with a --no-password key, finishes with no input.
func TestRunNoPasswordKeyNeverPrompts(t *testing.T) {
	testenv.RequireTool(t, "nvcc")
	unsetPasswords(t)
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	t.Setenv("NO_COLOR", "1")
	term := newTerminal(t)
	key := noPasswordKey(t, term, dir)
	proj := filepath.Join(dir, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"p.yaml": "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: tiny\ntargets: [sm_80]\nsteps:\n  - id: build\n    kind: cuda-build\n    sources: [k.cu]\n",
		"k.cu":   "extern \"C\" __global__ void scale(float *x, float a, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out := term.run(t, 5*time.Minute, "run", filepath.Join(proj, "p.yaml"), "--out", filepath.Join(dir, "run"), "--key", key)
	if code != 0 {
		t.Fatalf("run --key exited %d: %s\nterminal:\n%q", code, out, term.screen.String())
	}
	if !strings.Contains(out, "signed by key") {
		t.Errorf("run --key did not report signing:\n%s", out)
	}
	noPrompt(t, term)
}

// TestPasswordKeyPromptsOnce: a key with a password, stdin on a terminal
// and no password variable: the empty password fails, sign asks once,
// and the typed password unlocks the key.
func TestPasswordKeyPromptsOnce(t *testing.T) {
	unsetPasswords(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	t.Setenv("GPUATTEST_PASSWORD", "s3cret")
	if code := execute([]string{"key", "generate", "--output-key-prefix", key}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
		t.Fatalf("key generate exited %d", code)
	}
	unsetPasswords(t)
	term := newTerminal(t)
	typed := make(chan struct{})
	go func() {
		defer close(typed)
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(term.screen.String(), "Enter password for private key: ") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = term.ptmx.Write([]byte("s3cret\n"))
	}()
	code, out := term.run(t, 2*time.Minute, "sign", "--key", key+".key", writeStatement(t, dir), "-o", filepath.Join(dir, "b.jsonl"))
	<-typed
	if code != 0 {
		t.Fatalf("sign exited %d: %s\nterminal:\n%q", code, out, term.screen.String())
	}
	if n := strings.Count(term.screen.String(), "Enter password"); n != 1 {
		t.Errorf("asked %d times for the password, want once:\n%q", n, term.screen.String())
	}
}

// TestPasswordKeyWithoutTerminal: with no terminal and no password
// variable, a key with a password is refused with a hint, not waited on.
func TestPasswordKeyWithoutTerminal(t *testing.T) {
	unsetPasswords(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	t.Setenv("GPUATTEST_PASSWORD", "s3cret")
	if code := execute([]string{"key", "generate", "--output-key-prefix", key}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
		t.Fatalf("key generate exited %d", code)
	}
	unsetPasswords(t)
	var stderr bytes.Buffer
	code := execute([]string{"sign", "--key", key + ".key", writeStatement(t, dir)}, strings.NewReader(""), io.Discard, &stderr)
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	for _, want := range []string{"wrong password", "hint: set GPUATTEST_PASSWORD"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
