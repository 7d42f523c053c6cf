package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/internal/envlist"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/pipeline/image"
)

// Bwrap runs each command under bubblewrap in the extracted file system of
// its image: no daemon, no network, the image read-only, the work dir
// read-write at the same path. The image (name@sha256:..., or a pinned
// oci-layout: or docker-archive: source) is pulled with
// go-containerregistry and extracted safely into a digest-keyed cache
// (pipeline/image.Extract). With Command.GPU the NVIDIA device nodes and
// the host driver libraries are bound in.
type Bwrap struct {
	bin       string
	cacheDir  string
	logger    *slog.Logger
	hasGPU    func() bool
	imageOpts []image.Option

	mu       sync.Mutex
	prepared map[string]*bwrapImage
}

var _ Runner = (*Bwrap)(nil)

// bwrapImage is an image ready to run: its root file system and the
// environment from its config.
type bwrapImage struct {
	rootfs string
	env    []string
}

// DriverLibDir is where the host's NVIDIA driver libraries appear inside a
// bwrap sandbox run with a GPU (it is put first in LD_LIBRARY_PATH), the
// same directory NVIDIA's CUDA images list in LD_LIBRARY_PATH.
const DriverLibDir = "/usr/local/nvidia/lib64"

// BwrapOption configures a Bwrap runner.
type BwrapOption func(*Bwrap) error

// WithBwrapBinary sets the bwrap binary (default: bwrap in PATH).
func WithBwrapBinary(path string) BwrapOption {
	return func(b *Bwrap) error {
		if path == "" {
			return errors.New("bwrap binary path is empty")
		}
		b.bin = path
		return nil
	}
}

// WithBwrapCacheDir sets gpuattest's cache dir; root file systems go in
// its rootfs/ (default: image.DefaultCacheDir(), $XDG_CACHE_HOME/gpuattest).
func WithBwrapCacheDir(dir string) BwrapOption {
	return func(b *Bwrap) error {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("cache dir %q is not absolute", dir)
		}
		b.cacheDir = dir
		return nil
	}
}

// WithBwrapLogger sets the logger for pulls and extraction.
func WithBwrapLogger(l *slog.Logger) BwrapOption {
	return func(b *Bwrap) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		b.logger = l
		return nil
	}
}

// WithBwrapImageOptions passes options to image.Pull and image.Extract
// (keychain, transport, base dir of relative layout paths).
func WithBwrapImageOptions(opts ...image.Option) BwrapOption {
	return func(b *Bwrap) error { b.imageOpts = append(b.imageOpts, opts...); return nil }
}

// WithBwrapGPUCheck replaces the check for a GPU on this machine
// (default: HostHasGPU).
func WithBwrapGPUCheck(hasGPU func() bool) BwrapOption {
	return func(b *Bwrap) error {
		if hasGPU == nil {
			return errors.New("nil GPU check")
		}
		b.hasGPU = hasGPU
		return nil
	}
}

// NewBwrap returns a bubblewrap runner.
func NewBwrap(opts ...BwrapOption) (*Bwrap, error) {
	b := &Bwrap{bin: "bwrap", logger: slog.New(slog.DiscardHandler), hasGPU: HostHasGPU, prepared: map[string]*bwrapImage{}}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, fmt.Errorf("bwrap runner: %w", err)
		}
	}
	if b.cacheDir == "" {
		d, err := image.DefaultCacheDir()
		if err != nil {
			return nil, fmt.Errorf("bwrap runner: %w", err)
		}
		b.cacheDir = d
	}
	return b, nil
}

// Name returns "bwrap".
func (*Bwrap) Name() string { return "bwrap" }

// Info describes the bwrap runner.
func (*Bwrap) Info() Info { return Info{Name: "bwrap", Isolation: "namespace"} }

// Prepare pulls and extracts the pinned image (when not done yet) and
// returns the root file system directory. Run calls it; callers may call
// it first to keep the pull out of a step's timing.
func (b *Bwrap) Prepare(ctx context.Context, p image.Pinned) (string, error) {
	im, err := b.prepare(ctx, p)
	if err != nil {
		return "", err
	}
	return im.rootfs, nil
}

func (b *Bwrap) prepare(ctx context.Context, p image.Pinned) (*bwrapImage, error) {
	if err := checkImage("bwrap", p); err != nil {
		return nil, err
	}
	key := p.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	if im, ok := b.prepared[key]; ok {
		return im, nil
	}
	opts := append([]image.Option{image.WithLogger(b.logger)}, b.imageOpts...)
	img, _, err := image.PullPinned(ctx, p, opts...)
	if err != nil {
		return nil, fmt.Errorf("bwrap runner: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("bwrap runner: reading the config of %s: %w", key, err)
	}
	rootfs, err := image.Extract(ctx, img, b.cacheDir, opts...)
	if err != nil {
		return nil, fmt.Errorf("bwrap runner: %w", err)
	}
	im := &bwrapImage{rootfs: rootfs, env: cfg.Config.Env}
	b.prepared[key] = im
	return im, nil
}

// Run runs c under bwrap in c.Image's root file system. The exit status
// of the process is Result.ExitCode; a sandbox that could not be set up,
// or a command that could not be started in it, is an error.
func (b *Bwrap) Run(ctx context.Context, c *Command) (*Result, error) {
	if err := checkCommand("bwrap", c); err != nil {
		return nil, err
	}
	if err := checkImage("bwrap", c.Image); err != nil {
		return nil, err
	}
	if c.GPU && !b.hasGPU() {
		return nil, fmt.Errorf("bwrap runner: %w", ErrNoGPU)
	}
	im, err := b.prepare(ctx, c.Image)
	if err != nil {
		return nil, err
	}
	var gpu *gpuBinds
	if c.GPU {
		if gpu, err = hostGPUBinds(ctx); err != nil {
			return nil, fmt.Errorf("bwrap runner: %w", err)
		}
	}
	args, env, err := bwrapArgs(im, c, gpu)
	if err != nil {
		return nil, err
	}
	return b.exec(ctx, args, env, c)
}

// gpuBinds are the host's GPU device nodes and driver libraries.
type gpuBinds struct {
	devices []string
	// libs maps a library name (soname) to its host path.
	libs map[string]string
	// sys binds the host's /sys read-only: the CUDA driver and NVML read
	// the GPU's PCI and NUMA topology there.
	sys bool
}

var driverLib = lazyregexp.New(`^(libcuda\.so|libnvidia-[A-Za-z0-9_.-]+\.so|libnvcuvid\.so|libdxcore\.so)`)

// gpuDeviceNodes lists the GPU device nodes under dev, sorted: every
// nvidia* node (nvidia0..N, nvidiactl, nvidia-modeset, the unified
// memory nodes nvidia-uvm and nvidia-uvm-tools that cuInit opens, the
// nvidia-caps directory MIG needs) and WSL2's dxg.
func gpuDeviceNodes(dev string) []string {
	nodes, _ := filepath.Glob(filepath.Join(dev, "nvidia*"))
	if _, err := os.Stat(filepath.Join(dev, "dxg")); err == nil {
		nodes = append(nodes, filepath.Join(dev, "dxg"))
	}
	sort.Strings(nodes)
	return nodes
}

// hostGPUBinds finds the GPU device nodes, /sys and the driver libraries
// in ldconfig's cache.
func hostGPUBinds(ctx context.Context) (*gpuBinds, error) {
	_, sysErr := os.Stat("/sys/bus/pci")
	g := &gpuBinds{devices: gpuDeviceNodes("/dev"), libs: map[string]string{}, sys: sysErr == nil}
	out, err := exec.CommandContext(ctx, "ldconfig", "-p").Output()
	if err != nil {
		return nil, fmt.Errorf("listing driver libraries (ldconfig -p): %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, rest, ok := strings.Cut(line, " ")
		if !ok || !driverLib.MatchString(name) || !strings.Contains(rest, "x86-64") {
			continue
		}
		_, p, ok := strings.Cut(rest, "=> ")
		if !ok {
			continue
		}
		if _, dup := g.libs[name]; !dup {
			g.libs[name] = strings.TrimSpace(p)
		}
	}
	if _, ok := g.libs["libcuda.so.1"]; !ok {
		return nil, errors.New("the machine has GPU device nodes but no libcuda.so.1 in the ldconfig cache\nhint: install the NVIDIA driver's user-space libraries (libcuda1)")
	}
	return g, nil
}

// bwrapArgs builds bwrap's argument list and the environment of the
// command (the image's, c.Env over it), which exec passes to bwrap
// through --args (see envArgsFD), never on its command line.
//
// The image's top-level entries are bound read-only one by one onto
// bwrap's own (tmpfs) root rather than binding the rootfs at /, so that
// mount points for the work dir and other binds can be created even where
// the image has no such directory: every directory on the way to a bind
// target is recreated as a tmpfs directory whose other entries are bound
// from the image. The skeleton is remounted read-only at the end.
func bwrapArgs(im *bwrapImage, c *Command, gpu *gpuBinds) ([]string, []string, error) {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--args", envArgsFD,
		"--json-status-fd", "3",
	}
	special := map[string]bool{"/proc": true, "/dev": true, "/tmp": true}
	if gpu != nil && gpu.sys {
		special["/sys"] = true
	}
	targets := append([]string{filepath.Clean(c.Dir)}, c.ReadOnly...)
	if gpu != nil {
		for n := range gpu.libs {
			targets = append(targets, filepath.Join(DriverLibDir, n))
		}
	}
	expand := map[string]bool{}
	for _, t := range targets {
		if special[topLevel(t)] {
			continue
		}
		for d := filepath.Dir(t); d != "/"; d = filepath.Dir(d) {
			expand[d] = true
		}
	}
	isTarget := map[string]bool{}
	for _, t := range targets {
		isTarget[filepath.Clean(t)] = true
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := os.ReadDir(filepath.Join(im.rootfs, dir))
		if err != nil {
			return fmt.Errorf("bwrap runner: reading the image root file system: %w", err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if special[p] || isTarget[p] {
				continue
			}
			host := filepath.Join(im.rootfs, p)
			switch {
			case e.Type()&os.ModeSymlink != 0:
				target, err := os.Readlink(host)
				if err != nil {
					return err
				}
				args = append(args, "--symlink", target, p)
			case e.IsDir() && expand[p]:
				fi, err := e.Info()
				if err != nil {
					return err
				}
				args = append(args, "--perms", fmt.Sprintf("%04o", fi.Mode().Perm()), "--dir", p)
				if err := walk(p); err != nil {
					return err
				}
			case e.IsDir() || e.Type().IsRegular():
				args = append(args, "--ro-bind", host, p)
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return nil, nil, err
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")

	env := mergeEnv(im.env, c.Env)
	if gpu != nil {
		for _, d := range gpu.devices {
			args = append(args, "--dev-bind", d, d)
		}
		if gpu.sys {
			args = append(args, "--ro-bind", "/sys", "/sys")
		}
		names := make([]string, 0, len(gpu.libs))
		for n := range gpu.libs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			args = append(args, "--ro-bind", gpu.libs[n], filepath.Join(DriverLibDir, n))
		}
		ld := DriverLibDir
		if old, _ := envlist.Lookup(env, "LD_LIBRARY_PATH"); old != "" {
			ld += ":" + old
		}
		env = mergeEnv(env, []string{"LD_LIBRARY_PATH=" + ld})
	}
	for _, p := range c.ReadOnly {
		args = append(args, "--ro-bind", p, p)
	}
	args = append(args, "--bind", c.Dir, c.Dir, "--remount-ro", "/", "--chdir", c.Dir, "--")
	return append(args, c.Args...), env, nil
}

func topLevel(p string) string {
	p = filepath.Clean(p)
	if i := strings.IndexByte(p[1:], '/'); i >= 0 {
		return p[:i+1]
	}
	return p
}

// mergeEnv returns base with the entries of over added or replacing
// those with the same key, order kept.
func mergeEnv(base, over []string) []string {
	out := make([]string, 0, len(base)+len(over))
	idx := map[string]int{}
	for _, kv := range append(append([]string{}, base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// bwrapStatus is one JSON document bwrap writes to --json-status-fd.
type bwrapStatus struct {
	ChildPID *int `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// envArgsFD is the file descriptor (in bwrap) from which bwrap reads,
// with --args, the --setenv options that set the command's environment:
// a process's command line (/proc/PID/cmdline) is readable by every
// user of the machine, its environment (/proc/PID/environ) only by its
// own. fd 3 is --json-status-fd.
const envArgsFD = "4"

// envArgs are the --setenv options of env, NUL-separated as --args
// reads them.
func envArgs(env []string) []byte {
	var b bytes.Buffer
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		for _, a := range []string{"--setenv", k, v} {
			b.WriteString(a)
			b.WriteByte(0)
		}
	}
	return b.Bytes()
}

// exec runs bwrap with args (which hold --args envArgsFD after
// --clearenv) and the command's environment env, written to bwrap's
// envArgsFD through a pipe.
func (b *Bwrap) exec(ctx context.Context, args, env []string, c *Command) (*Result, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusR.Close()
	envR, envW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return nil, err
	}
	var errTail tailBuffer
	cmd := exec.Command(b.bin, args...)
	cmd.Env = []string{}
	cmd.Stdout = orDiscard(c.Stdout)
	cmd.Stderr = io.MultiWriter(orDiscard(c.Stderr), &errTail)
	cmd.ExtraFiles = []*os.File{statusW, envR}
	ownGroup(cmd, false)
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Start()
	statusW.Close()
	envR.Close()
	if err != nil {
		envW.Close()
		return nil, fmt.Errorf("bwrap runner: starting %s: %w\nhint: install bubblewrap (apt-get install bubblewrap)", b.bin, err)
	}
	// bwrap reads the whole of it before it sets anything up; a bwrap
	// that dies first fails the write (EPIPE), and its exit says why.
	go func() {
		_, _ = envW.Write(envArgs(env))
		envW.Close()
	}()
	statusDone := make(chan bwrapStatus, 1)
	go func() {
		var st bwrapStatus
		dec := json.NewDecoder(statusR)
		for {
			var s bwrapStatus
			if dec.Decode(&s) != nil {
				break
			}
			if s.ChildPID != nil {
				st.ChildPID = s.ChildPID
			}
			if s.ExitCode != nil {
				st.ExitCode = s.ExitCode
			}
		}
		statusDone <- st
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		// bwrap holds pid 1 of the sandbox's pid namespace with
		// --die-with-parent: killing bwrap takes the whole sandbox down.
		signalGroup(cmd.Process.Pid, true)
		<-done
		return &Result{ExitCode: -1, Duration: time.Since(start)}, fmt.Errorf("bwrap runner: %s: %w", c.Args[0], context.Cause(ctx))
	}
	res := &Result{Duration: time.Since(start)}
	st := <-statusDone
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return nil, fmt.Errorf("bwrap runner: waiting for bwrap: %w", werr)
		}
	}
	msg := errTail.String()
	if st.ChildPID == nil {
		return nil, fmt.Errorf("bwrap runner: setting up the sandbox failed: %s\nhint: bwrap needs user namespaces (sysctl kernel.unprivileged_userns_clone=1) or root", strings.TrimSpace(lastLines(msg, 5)))
	}
	if i := strings.LastIndex(msg, "bwrap: execvp "); i >= 0 && cmd.ProcessState.ExitCode() == 1 {
		return nil, fmt.Errorf("bwrap runner: starting %s in the image: %s", c.Args[0], strings.TrimSpace(msg[i:]))
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	if st.ExitCode != nil {
		res.ExitCode = *st.ExitCode
	}
	return res, nil
}
