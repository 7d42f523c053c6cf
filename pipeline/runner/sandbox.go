package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Sandbox runs what the host runner would run, with this machine's own
// tools, under bubblewrap: the host's file system read-only, /tmp,
// /var/tmp, /run, /home and /root replaced by empty scratch file systems
// (so no file or socket there, the docker socket included, is reachable),
// a fresh /dev and /proc, no network and new user, pid, ipc and uts
// namespaces, no capabilities. The only host directory a process can
// write is its Command.Dir, which must lie inside one of the writable
// roots given to NewSandbox; a command elsewhere is refused. It stands
// in for the host runner (its Name is "host") where the commands come
// from a source that is not trusted: a rebuild.
type Sandbox struct {
	bwrap    *Bwrap
	writable []string
}

var _ Runner = (*Sandbox)(nil)

// sandboxScratch are the directories a Sandbox replaces with empty
// scratch file systems, when they exist on the host as directories.
var sandboxScratch = []string{"/tmp", "/var/tmp", "/run", "/home", "/root", "/dev/shm"}

// NewSandbox returns a Sandbox whose commands may write only inside the
// writable roots (absolute directories). opts may set the bwrap binary.
// It fails when bwrap cannot be found.
func NewSandbox(writable []string, opts ...BwrapOption) (*Sandbox, error) {
	b := &Bwrap{bin: "bwrap"}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	if _, err := exec.LookPath(b.bin); err != nil {
		return nil, fmt.Errorf("sandbox: finding bwrap: %w\nhint: install bubblewrap (apt-get install bubblewrap)", err)
	}
	if len(writable) == 0 {
		return nil, errors.New("sandbox: no writable directory given")
	}
	s := &Sandbox{bwrap: b}
	for _, w := range writable {
		if !filepath.IsAbs(w) {
			return nil, fmt.Errorf("sandbox: writable directory %q: expected an absolute path", w)
		}
		real, err := filepath.EvalSymlinks(w)
		if err != nil {
			return nil, fmt.Errorf("sandbox: writable directory: %w", err)
		}
		s.writable = append(s.writable, real)
	}
	return s, nil
}

// Name returns "host": a Sandbox runs the steps written for the host
// runner, with the host's tools at the same paths.
func (*Sandbox) Name() string { return "host" }

// Info describes the sandbox for the run record.
func (*Sandbox) Info() Info { return Info{Name: "host", Isolation: "namespace"} }

// Run runs c under bwrap as described on Sandbox. The exit status of the
// process is Result.ExitCode; a command outside the writable roots, a
// command asking for an image or a GPU, or a sandbox that could not be
// set up is an error.
func (s *Sandbox) Run(ctx context.Context, c *Command) (*Result, error) {
	if err := checkCommand("sandbox", c); err != nil {
		return nil, err
	}
	if !c.Image.IsZero() {
		return nil, fmt.Errorf("sandbox: step asks for image %s: the sandbox runs the host's tools\nhint: use runner: docker or bwrap to run inside an image", c.Image)
	}
	if c.GPU {
		return nil, errors.New("sandbox: a command asks for the GPU: the sandbox binds no device\nhint: a rebuild runs build steps only, which need no GPU")
	}
	dir, err := filepath.EvalSymlinks(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: work directory: %w", err)
	}
	if !slices.ContainsFunc(s.writable, func(w string) bool { return within(w, dir) }) {
		return nil, fmt.Errorf("sandbox: work directory %s is outside the writable directories (%s)", c.Dir, strings.Join(s.writable, ", "))
	}
	return s.bwrap.exec(ctx, sandboxArgs(dir, c), c)
}

// sandboxArgs builds bwrap's argument list for c, run in dir (c.Dir with
// links resolved).
func sandboxArgs(dir string, c *Command) []string {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--json-status-fd", "3",
		"--ro-bind", "/", "/",
		"--dev", "/dev", "--proc", "/proc",
	}
	for _, d := range sandboxScratch {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			args = append(args, "--tmpfs", d)
		}
	}
	for _, p := range c.ReadOnly {
		args = append(args, "--ro-bind", p, p)
	}
	args = append(args, "--bind", dir, dir, "--chdir", dir)
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--")
	return append(args, c.Args...)
}

// within reports whether p is root or inside it (both clean and
// absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}
