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
