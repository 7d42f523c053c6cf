package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// TestStepEnv: the steps' environment names neither the keys' directory
// nor the job's, and HOME moves into the job's directory when the keys
// lie under it (a shared home directory).
func TestStepEnv(t *testing.T) {
	root := t.TempDir()
	keys := filepath.Join(root, "shared", "d1", stagefs.KeysDir)
	jdir := filepath.Join(root, "shared", "d1", "jobs", "a100-0")
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{name: "home elsewhere", env: []string{"HOME=/home/other", "PATH=/usr/bin"}, want: []string{"HOME=/home/other", "PATH=/usr/bin"}},
		{name: "shared home", env: []string{"HOME=" + root, "PATH=/usr/bin"}, want: []string{"HOME=" + filepath.Join(jdir, "home"), "PATH=/usr/bin"}},
		{name: "variables naming the keys or the job", env: []string{"KEYS=" + keys + "/a100-0.key", "JOB=" + jdir, "X=1"}, want: []string{"X=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stepEnv(tt.env, keys, jdir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("stepEnv = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHostSandbox: a node sandboxes its host-runner steps and says so in
// its statement; a bwrap that cannot be found fails the node naming the
// opt-out, never running the steps unsandboxed; with the opt-out the
// statement says none.
func TestHostSandbox(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "shared", "d1")
	work := filepath.Join(dir, "jobs", "a100-0", "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "jobs", "a100-0", "home")
	missing := &Config{Dir: dir, sandbox: true, BwrapOptions: []runner.BwrapOption{runner.WithBwrapBinary(filepath.Join(root, "no-bwrap"))}}
	pred := &dispatch.Node{}
	opts, err := missing.hostSandbox(t.Context(), work, home, pred)
	if err == nil || !strings.Contains(err.Error(), "hostSteps: unsandboxed") || !strings.Contains(err.Error(), "refusing to run the host-runner steps unsandboxed") || opts != nil || pred.Sandbox != "" {
		t.Errorf("bwrap missing: %v, %d options, sandbox %q; want an error naming the opt-out and nothing run", err, len(opts), pred.Sandbox)
	}
	off := &Config{Dir: dir}
	if opts, err := off.hostSandbox(t.Context(), work, home, pred); err != nil || opts != nil || pred.Sandbox != dispatch.SandboxNone {
		t.Errorf("hostSteps: unsandboxed: %v, %d options, sandbox %q; want none", err, len(opts), pred.Sandbox)
	}
	testenv.RequireTool(t, "bwrap")
	on := &Config{Dir: dir, sandbox: true}
	if opts, err := on.hostSandbox(t.Context(), work, home, pred); err != nil || len(opts) != 1 || pred.Sandbox != dispatch.SandboxBwrap {
		t.Errorf("sandboxed: %v, %d options, sandbox %q; want the sandbox runner and bwrap", err, len(opts), pred.Sandbox)
	}
}
