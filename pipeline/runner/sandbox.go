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
// from a source that is not trusted: a rebuild, and the GPU steps of a
// Slurm fleet node.
//
// WithSandboxHidden covers further host directories (a fleet's shared
// directory, where the job keys are) with empty scratch file systems;
// WithSandboxGPU lets a command with GPU set run, the host's NVIDIA
// device nodes bound in. Without it a GPU command is refused.
type Sandbox struct {
	bwrap    *Bwrap
	writable []string
	hidden   []string
	gpu      bool
	devDir   string
}

var _ Runner = (*Sandbox)(nil)

// SandboxScratch are the directories a Sandbox replaces with empty
// scratch file systems, when they exist on the host as directories.
var SandboxScratch = []string{"/tmp", "/var/tmp", "/run", "/home", "/root", "/dev/shm"}

// SandboxOption configures a Sandbox.
type SandboxOption func(*Sandbox) error

// WithSandboxBwrap applies opts to the sandbox's bwrap (its binary).
func WithSandboxBwrap(opts ...BwrapOption) SandboxOption {
	return func(s *Sandbox) error {
		for _, o := range opts {
			if err := o(s.bwrap); err != nil {
				return err
			}
		}
		return nil
	}
}

// WithSandboxHidden covers each of dirs (absolute; links resolved when
// it exists) with an empty scratch file system, so that no file under
// it can be read. A command's work directory inside a hidden directory
// is still bound, read-write, on top. The root directory cannot be
// hidden.
func WithSandboxHidden(dirs ...string) SandboxOption {
	return func(s *Sandbox) error {
		for _, d := range dirs {
			if !filepath.IsAbs(d) {
				return fmt.Errorf("hidden directory %q: expected an absolute path", d)
			}
			d = filepath.Clean(d)
			if real, err := filepath.EvalSymlinks(d); err == nil {
				d = real
			}
			if d == "/" {
				return errors.New("hidden directory /: hiding the root would hide the host's tools")
			}
			s.hidden = append(s.hidden, d)
		}
		return nil
	}
}

// WithSandboxGPU lets a command with GPU set run, with every GPU device
// node in devDir (nvidia0..N, nvidiactl, nvidia-uvm, nvidia-uvm-tools,
// nvidia-modeset, nvidia-caps; "" is /dev) bound at /dev/NAME; the
// driver libraries are on the read-only host file system already. A
// machine without such nodes binds none.
func WithSandboxGPU(devDir string) SandboxOption {
	return func(s *Sandbox) error {
		if devDir == "" {
			devDir = "/dev"
		}
		if !filepath.IsAbs(devDir) {
			return fmt.Errorf("device directory %q: expected an absolute path", devDir)
		}
		s.gpu, s.devDir = true, filepath.Clean(devDir)
		return nil
	}
}

// NewSandbox returns a Sandbox whose commands may write only inside the
// writable roots (absolute directories). It fails when bwrap cannot be
// found.
func NewSandbox(writable []string, opts ...SandboxOption) (*Sandbox, error) {
	b := &Bwrap{bin: "bwrap"}
	s := &Sandbox{bwrap: b}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	if _, err := exec.LookPath(b.bin); err != nil {
		return nil, fmt.Errorf("sandbox: finding bwrap: %w\nhint: install bubblewrap (apt-get install bubblewrap)", err)
	}
	if len(writable) == 0 {
		return nil, errors.New("sandbox: no writable directory given")
	}
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
	if c.GPU && !s.gpu {
		return nil, errors.New("sandbox: a command asks for the GPU: the sandbox binds no device\nhint: a rebuild runs build steps only, which need no GPU")
	}
	dir, err := filepath.EvalSymlinks(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: work directory: %w", err)
	}
	if !slices.ContainsFunc(s.writable, func(w string) bool { return within(w, dir) }) {
		return nil, fmt.Errorf("sandbox: work directory %s is outside the writable directories (%s)", c.Dir, strings.Join(s.writable, ", "))
	}
	return s.bwrap.exec(ctx, s.args(dir, c), c.Env, c)
}

// Check runs true in the sandbox, in its first writable directory: it
// fails when bwrap cannot set the sandbox up on this machine (no
// unprivileged user namespaces).
func (s *Sandbox) Check(ctx context.Context) error {
	var stderr strings.Builder
	res, err := s.Run(ctx, &Command{Args: []string{"true"}, Dir: s.writable[0], Env: []string{"PATH=/usr/bin:/bin"}, Stderr: &stderr})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("sandbox: true exited %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// args builds bwrap's argument list for c, run in dir (c.Dir with links
// resolved): the host read-only, the scratch and hidden directories
// empty, the GPU's device nodes when c asks for it, the read-only paths
// and the work directory bound last. c.Env is not among them: exec
// passes it through --args (envArgsFD).
func (s *Sandbox) args(dir string, c *Command) []string {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--args", envArgsFD,
		"--json-status-fd", "3",
		"--ro-bind", "/", "/",
		"--dev", "/dev", "--proc", "/proc",
	}
	for _, d := range SandboxScratch {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			args = append(args, "--tmpfs", d)
		}
	}
	for _, d := range s.hidden {
		args = append(args, "--tmpfs", d)
	}
	if c.GPU && s.gpu {
		for _, d := range gpuDeviceNodes(s.devDir) {
			args = append(args, "--dev-bind", d, filepath.Join("/dev", filepath.Base(d)))
		}
	}
	for _, p := range c.ReadOnly {
		args = append(args, "--ro-bind", p, p)
	}
	args = append(args, "--bind", dir, dir, "--chdir", dir, "--")
	return append(args, c.Args...)
}

// within reports whether p is root or inside it (both clean and
// absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}
