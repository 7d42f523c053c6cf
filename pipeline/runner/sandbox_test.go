package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// A sandboxed command writes its work directory and nothing else on the
// host: not another directory under /tmp, not a directory outside the
// scratch file systems; it reaches no network and no home directory.
func TestSandboxConfines(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bwrap")
	root := t.TempDir()
	work := filepath.Join(root, "src")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	outsideTmp := t.TempDir()
	// A directory on the host that is not a scratch file system in the
	// sandbox: the package's own directory.
	outsideHost, err := os.MkdirTemp(".", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	outsideHost, _ = filepath.Abs(outsideHost)
	t.Cleanup(func() { os.RemoveAll(outsideHost) })
	s, err := NewSandbox([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	script := `echo in > inside
echo out > "$1/tmp" 2>/dev/null
echo out > "$2/host" 2>/dev/null
{ ls -A /root; ls -A /home; } | wc -w
cat /proc/net/dev | grep -c : || true
`
	var stdout, stderr bytes.Buffer
	res, err := s.Run(t.Context(), &Command{Args: []string{"sh", "-c", script, "sh", outsideTmp, outsideHost}, Dir: work, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(work, "inside")); err != nil || string(b) != "in\n" {
		t.Fatalf("the work directory's file: %q, %v, want it written", b, err)
	}
	for _, p := range []string{filepath.Join(outsideTmp, "tmp"), filepath.Join(outsideHost, "host")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the sandboxed command wrote %s, outside its work directory", p)
		}
	}
	// No home directories, one network interface (lo).
	if got := strings.Fields(stdout.String()); len(got) != 2 || got[0] != "0" || got[1] != "1" {
		t.Errorf("home entries and interfaces: %q, want 0 and 1 (lo)", got)
	}
}

// A command whose work directory is outside the writable roots, or that
// asks for a GPU, is refused before anything runs.
func TestSandboxRefuses(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bwrap")
	s, err := NewSandbox([]string{t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, err := s.Run(t.Context(), &Command{Args: []string{"true"}, Dir: other}); err == nil || !strings.Contains(err.Error(), "outside the writable") {
		t.Fatalf("a work directory outside: %v, want it refused", err)
	}
	if _, err := NewSandbox(nil); err == nil {
		t.Fatal("NewSandbox with no writable directory: no error")
	}
}

// A hidden directory shows nothing to a sandboxed command, by a relative
// path, its absolute path or a walk, except the work directory inside
// it, which stays writable: a fleet node's steps cannot read the job
// keys on the shared directory.
func TestSandboxHides(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bwrap")
	// Not under /tmp or another directory the sandbox replaces anyway
	// (a checkout may lie there): the test must see the key unhidden.
	shared := testenv.DirOutside(t, "sandbox-hide-", SandboxScratch)
	work := filepath.Join(shared, "d1", "jobs", "a-0", "work")
	keys := filepath.Join(shared, "d1", "keys")
	for _, d := range []string{work, keys} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(keys, "a-0.key")
	if err := os.WriteFile(key, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Unhidden, the key is there to read.
	open, err := NewSandbox([]string{work})
	if err != nil {
		t.Fatal(err)
	}
	var seen bytes.Buffer
	if _, err := open.Run(t.Context(), &Command{Args: []string{"cat", "../../../keys/a-0.key"}, Dir: work, Stdout: &seen}); err != nil || seen.String() != "SECRET" {
		t.Fatalf("without hiding, the key reads %q (%v), want it readable: the test would prove nothing", seen.String(), err)
	}
	s, err := NewSandbox([]string{work}, WithSandboxHidden(shared))
	if err != nil {
		t.Fatal(err)
	}
	script := `cat ../../../keys/a-0.key; cat "$1"; find "$2" -name '*.key'; ls "$2/d1"; echo ok > out`
	var stdout, stderr bytes.Buffer
	res, err := s.Run(t.Context(), &Command{Args: []string{"sh", "-c", script, "sh", key, shared}, Dir: work, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, stderr.String())
	}
	if strings.Contains(stdout.String(), "SECRET") || strings.Contains(stdout.String(), "a-0.key") || strings.Contains(stdout.String(), "keys") {
		t.Errorf("the sandboxed command saw the key: stdout %q", stdout.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "jobs" {
		t.Errorf("the hidden directory holds %q, want only the path to the work directory (jobs)", got)
	}
	if b, err := os.ReadFile(filepath.Join(work, "out")); err != nil || string(b) != "ok\n" {
		t.Errorf("the work directory's file: %q, %v, want it written", b, err)
	}
	if _, err := NewSandbox([]string{work}, WithSandboxHidden("/")); err == nil {
		t.Error("hiding /: no error")
	}
	if _, err := NewSandbox([]string{work}, WithSandboxHidden("rel")); err == nil {
		t.Error("hiding a relative path: no error")
	}
}

// With WithSandboxGPU a GPU command runs with the device directory's GPU
// nodes at /dev/NAME (regular files stand in for the device nodes: the
// binding is the same) and nothing else of it; a command without GPU
// gets none.
func TestSandboxGPUDevices(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bwrap")
	devDir, work := t.TempDir(), t.TempDir()
	for _, n := range []string{"nvidia0", "nvidiactl", "nvidia-uvm", "sda"} {
		if err := os.WriteFile(filepath.Join(devDir, n), []byte(n), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSandbox([]string{work}, WithSandboxGPU(devDir))
	if err != nil {
		t.Fatal(err)
	}
	list := func(gpu bool) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		res, err := s.Run(t.Context(), &Command{Args: []string{"sh", "-c", "cat /dev/nvidia0; echo; ls /dev | grep -E 'nvidia|sda' | tr '\\n' ' '"}, Dir: work, GPU: gpu, Env: []string{"PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=0"}, Stdout: &stdout, Stderr: &stderr})
		if err != nil {
			t.Fatal(err)
		}
		if gpu && res.ExitCode != 0 {
			t.Fatalf("exit %d: %s", res.ExitCode, stderr.String())
		}
		return strings.TrimSpace(stdout.String())
	}
	if got, want := list(true), "nvidia0\nnvidia-uvm nvidia0 nvidiactl"; got != want {
		t.Errorf("a GPU command sees %q, want %q", got, want)
	}
	if got := list(false); got != "" {
		t.Errorf("a command without GPU sees %q, want no device", got)
	}
	plain, err := NewSandbox([]string{work})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Run(t.Context(), &Command{Args: []string{"true"}, Dir: work, GPU: true}); err == nil || !strings.Contains(err.Error(), "asks for the GPU") {
		t.Errorf("a GPU command without WithSandboxGPU: %v, want it refused", err)
	}
	if err := s.Check(t.Context()); err != nil {
		t.Errorf("Check: %v", err)
	}
}
