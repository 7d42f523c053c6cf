package runner

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/image"
)

// Docker runs each command in a fresh docker container, talking to the
// engine through the docker CLI. Only digest-pinned images are accepted:
// a registry image runs by repo@sha256:<manifest> (pulled by digest when
// the engine lacks it); an image carried as a file (oci-layout:,
// docker-archive:) is loaded into the engine untagged and runs by its
// image ID, which must be the pinned config digest. The container has no
// network, runs as the invoking user and is removed when the command ends
// or ctx is done. The work dir is bind-mounted at the same path; when bind
// mounts do not reach the engine (a remote engine) the work dir is copied
// in and out.
type Docker struct {
	bin       string
	prefix    string
	logger    *slog.Logger
	forceCopy bool
	hasGPU    func() bool

	probeMu   sync.Mutex
	probed    bool
	bindWorks bool

	loadMu sync.Mutex
	loaded map[string]string // pinned file source -> image ID
}

var _ Runner = (*Docker)(nil)

// DockerOption configures a Docker runner.
type DockerOption func(*Docker) error

// WithDockerBinary sets the docker CLI to use (default: docker in PATH).
func WithDockerBinary(path string) DockerOption {
	return func(d *Docker) error {
		if path == "" {
			return errors.New("docker binary path is empty")
		}
		d.bin = path
		return nil
	}
}

// WithDockerLogger sets the logger for image pulls and fallbacks.
func WithDockerLogger(l *slog.Logger) DockerOption {
	return func(d *Docker) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		d.logger = l
		return nil
	}
}

// WithDockerNamePrefix sets the prefix of container names (default
// "gpuattest-"); a random suffix follows it.
func WithDockerNamePrefix(prefix string) DockerOption {
	return func(d *Docker) error {
		if prefix == "" {
			return errors.New("empty container name prefix")
		}
		d.prefix = prefix
		return nil
	}
}

// WithDockerCopy makes the runner copy the work dir into the container
// and back out instead of bind-mounting it, as it does by itself when the
// engine cannot see host paths.
func WithDockerCopy() DockerOption {
	return func(d *Docker) error { d.forceCopy = true; return nil }
}

// WithDockerGPUCheck replaces the check for a GPU on this machine
// (default: a /dev/nvidia<N> device node exists).
func WithDockerGPUCheck(hasGPU func() bool) DockerOption {
	return func(d *Docker) error {
		if hasGPU == nil {
			return errors.New("nil GPU check")
		}
		d.hasGPU = hasGPU
		return nil
	}
}

// NewDocker returns a docker runner. It does not contact the engine.
func NewDocker(opts ...DockerOption) (*Docker, error) {
	d := &Docker{bin: "docker", prefix: "gpuattest-", logger: slog.New(slog.DiscardHandler), hasGPU: HostHasGPU}
	for _, o := range opts {
		if err := o(d); err != nil {
			return nil, fmt.Errorf("docker runner: %w", err)
		}
	}
	return d, nil
}

// Name returns "docker".
func (*Docker) Name() string { return "docker" }

// Info describes the docker runner.
func (*Docker) Info() Info { return Info{Name: "docker", Isolation: "container"} }

// HostHasGPU reports whether an NVIDIA GPU device node (/dev/nvidia0,
// /dev/nvidia1, ...) or, under WSL2, /dev/dxg exists on this machine.
func HostHasGPU() bool {
	m, _ := filepath.Glob("/dev/nvidia[0-9]*")
	if len(m) > 0 {
		return true
	}
	_, err := os.Stat("/dev/dxg") // WSL2: the GPU is reached through dxgkrnl
	return err == nil
}

// ErrNoGPU is returned when a command asks for a GPU and the machine has
// none.
var ErrNoGPU = errors.New("the step asks for a GPU (gpu: true) but this machine has none (no /dev/nvidia<N>)\nhint: run it on a GPU machine, or drop gpu: true")

// checkImage refuses a command image that is missing or not pinned by
// digest, with a hint.
func checkImage(runner string, p image.Pinned) error {
	if p.IsZero() {
		return fmt.Errorf("%s runner: the step has no image\nhint: set image: NAME@sha256:... (run gpuattest lock to pin a tag)", runner)
	}
	if p.Source.Floating() {
		return fmt.Errorf("%s runner: image %q is not pinned by digest\nhint: use NAME@sha256:<digest> (or oci-layout:PATH@sha256:...); gpuattest lock resolves tags to digests", runner, p.String())
	}
	return nil
}

func checkCommand(runner string, c *Command) error {
	if len(c.Args) == 0 {
		return fmt.Errorf("%s runner: empty command", runner)
	}
	if !filepath.IsAbs(c.Dir) {
		return fmt.Errorf("%s runner: work dir %q is not absolute", runner, c.Dir)
	}
	if fi, err := os.Stat(c.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s runner: work dir %s is not a directory", runner, c.Dir)
	}
	for _, p := range c.ReadOnly {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s runner: read-only path %q is not absolute", runner, p)
		}
	}
	return nil
}

// Run runs c in a new container of c.Image. A non-zero exit of the
// process is Result.ExitCode; an engine failure (exit 125, or a command
// the engine could not start) is an error.
func (d *Docker) Run(ctx context.Context, c *Command) (*Result, error) {
	if err := checkCommand("docker", c); err != nil {
		return nil, err
	}
	if err := checkImage("docker", c.Image); err != nil {
		return nil, err
	}
	if c.GPU && !d.hasGPU() {
		return nil, fmt.Errorf("docker runner: %w", ErrNoGPU)
	}
	ref, err := d.ensureImage(ctx, c.Image)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	bind := !d.forceCopy && d.bindMountsWork(ctx, ref)
	if !bind {
		res.Notes = append(res.Notes, "bind mounts unavailable: copied the work dir into the container and back out (process ran as root inside; files written back as the invoking user)")
	}

	tmp, err := os.MkdirTemp("", "gpuattest-docker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	envFile := filepath.Join(tmp, "env")
	if err := writeEnvFile(envFile, c.Env); err != nil {
		return nil, err
	}
	cname := d.prefix + randomHex(8)
	// Bind mounts: the process runs as the invoking user so that what it
	// writes is theirs. Copy mode: files come back through copyOut, which
	// writes them as the invoking user; inside, the copied tree belongs
	// to root (docker cp cannot chown to a uid the image's passwd lacks),
	// so the process runs as root there.
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	if !bind {
		user = "0:0"
	}
	args := []string{
		"--name", cname, "--network", "none", "--user", user,
		"--workdir", c.Dir, "--env-file", envFile,
	}
	if c.GPU {
		args = append(args, "--gpus", "all")
	}
	if bind {
		args = append(args, "--volume", c.Dir+":"+c.Dir)
		for _, p := range c.ReadOnly {
			args = append(args, "--volume", p+":"+p+":ro")
		}
	}
	args = append(args, "--", ref)
	args = append(args, c.Args...)

	// Whatever happens, the container goes.
	defer d.remove(cname)

	start := time.Now()
	var code int
	if bind {
		code, err = d.attached(ctx, cname, append([]string{"run", "--rm"}, args...), c.Stdout, c.Stderr)
	} else {
		code, err = d.copied(ctx, cname, args, c)
	}
	res.Duration = time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			res.ExitCode = -1
			return res, fmt.Errorf("docker runner: %s: %w", c.Args[0], context.Cause(ctx))
		}
		return nil, err
	}
	res.ExitCode = code
	return res, nil
}

// attached runs a docker CLI command that streams the container's output
// (run, or start -a) and returns the container's exit code. When ctx is
// done it removes the container (which ends the CLI) and returns ctx's
// error.
func (d *Docker) attached(ctx context.Context, cname string, args []string, stdout, stderr io.Writer) (int, error) {
	var errTail tailBuffer
	cmd := exec.Command(d.bin, args...)
	cmd.Stdout = orDiscard(stdout)
	cmd.Stderr = io.MultiWriter(orDiscard(stderr), &errTail)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("docker runner: starting %s: %w", d.bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		t0 := time.Now()
		d.remove(cname)
		d.logger.Debug("cancelled: removed the container", "container", cname, "took", time.Since(t0))
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			d.logger.Warn("docker CLI still running 10s after its container was removed: killing it", "container", cname)
			_ = cmd.Process.Kill()
			<-done
		}
		d.logger.Debug("cancelled: docker CLI exited", "container", cname, "took", time.Since(t0))
		return -1, ctx.Err()
	}
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return 0, fmt.Errorf("docker runner: waiting for %s: %w", d.bin, werr)
		}
	}
	code := cmd.ProcessState.ExitCode()
	// 125: the engine failed; 126/127 with a daemon message: the command
	// could not be started in the container.
	msg := errTail.String()
	if code == 125 || ((code == 126 || code == 127) && strings.Contains(msg, "Error response from daemon")) {
		return 0, fmt.Errorf("docker runner: docker %s failed (exit %d): %s", args[0], code, strings.TrimSpace(lastLines(msg, 5)))
	}
	return code, nil
}

// copied runs the container without bind mounts: create, copy the work
// dir (and read-only paths) in, start attached, copy the work dir out.
func (d *Docker) copied(ctx context.Context, cname string, args []string, c *Command) (int, error) {
	if out, err := d.cli(ctx, nil, append([]string{"create"}, args...)...); err != nil {
		return 0, fmt.Errorf("docker runner: creating the container: %w: %s", err, out)
	}
	for _, p := range append([]string{c.Dir}, c.ReadOnly...) {
		if err := d.copyIn(ctx, cname, p); err != nil {
			return 0, err
		}
	}
	code, err := d.attached(ctx, cname, []string{"start", "--attach", cname}, c.Stdout, c.Stderr)
	if err != nil {
		return code, err
	}
	if err := d.copyOut(ctx, cname, c.Dir); err != nil {
		return 0, err
	}
	return code, nil
}

// copyIn streams a tar of the host path p into the container at the same
// path (owned by root in the container).
func (d *Docker) copyIn(ctx context.Context, cname, p string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTree(pw, p)) }()
	out, err := d.cli(ctx, pr, "cp", "-", cname+":/")
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return fmt.Errorf("docker runner: copying %s into the container: %w: %s", p, err, out)
	}
	return nil
}

// copyOut copies the container's dir back over the host's dir. Files
// removed in the container are not removed on the host.
func (d *Docker) copyOut(ctx context.Context, cname, dir string) error {
	cmd := exec.CommandContext(ctx, d.bin, "cp", cname+":"+dir+"/.", "-")
	var stderr tailBuffer
	cmd.Stderr = &stderr
	rc, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("docker runner: copying %s out: %w", dir, err)
	}
	xerr := extractInto(rc, dir)
	_, _ = io.Copy(io.Discard, rc)
	werr := cmd.Wait()
	if werr != nil {
		return fmt.Errorf("docker runner: copying %s out of the container: %w: %s", dir, werr, stderr.String())
	}
	if xerr != nil {
		return fmt.Errorf("docker runner: copying %s out of the container: %w", dir, xerr)
	}
	return nil
}

// writeTree writes the tree at root as a tar whose names are the absolute
// paths without the leading slash, owned by the invoking user.
func writeTree(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	uid, gid := os.Getuid(), os.Getgid()
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var link string
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.IsDir(), fi.Mode().IsRegular():
		default:
			return nil // devices, sockets, pipes stay behind
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = strings.TrimPrefix(filepath.ToSlash(p), "/")
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = uid, gid, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// extractInto extracts a tar (names relative to dir) into dir through an
// os.Root: no entry can land outside dir, whatever its name or the
// symlinks in its path. Device nodes and other special files are skipped.
func extractInto(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if n == "." || n == "" {
			continue
		}
		if path.IsAbs(n) || n == ".." || strings.HasPrefix(n, "../") {
			return fmt.Errorf("refusing tar entry %q: outside the work dir", hdr.Name)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(n, 0o755); err != nil {
				return err
			}
			_ = root.Chmod(n, mode|0o700)
		case tar.TypeReg:
			if err := root.MkdirAll(path.Dir(n), 0o755); err != nil {
				return err
			}
			if fi, err := root.Lstat(n); err == nil && !fi.Mode().IsRegular() {
				if err := root.RemoveAll(n); err != nil {
					return err
				}
			}
			f, err := root.OpenFile(n, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := root.Chmod(n, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := root.MkdirAll(path.Dir(n), 0o755); err != nil {
				return err
			}
			if fi, err := root.Lstat(n); err == nil {
				if fi.Mode()&fs.ModeSymlink != 0 {
					if old, _ := root.Readlink(n); old == hdr.Linkname {
						continue
					}
				}
				if err := root.RemoveAll(n); err != nil {
					return err
				}
			}
			if err := root.Symlink(hdr.Linkname, n); err != nil {
				return err
			}
		}
	}
}

// ensureImage makes sure the engine has the pinned image and returns the
// reference to run it by: repo@sha256:<manifest> for a registry image,
// pulled by digest when the engine lacks it; the image ID for a file
// source, loaded into the engine when it lacks it (see loadFile).
func (d *Docker) ensureImage(ctx context.Context, p image.Pinned) (string, error) {
	if p.Source.Kind != image.Registry {
		return d.loadFile(ctx, p)
	}
	ref := p.String()
	if _, err := d.cli(ctx, nil, "image", "inspect", "--format", "{{.Id}}", ref); err == nil {
		return ref, nil
	}
	d.logger.Info("pulling image", "image", ref)
	start := time.Now()
	out, err := d.cli(ctx, nil, "pull", "--quiet", ref)
	if err != nil {
		return "", fmt.Errorf("docker runner: pulling %s: %w: %s\nhint: the engine must reach the registry; on an offline machine carry the image as a file (oci-layout:PATH or docker-archive:PATH) and lock that", ref, err, strings.TrimSpace(lastLines(string(out), 5)))
	}
	d.logger.Info("pulled image", "image", ref, "took", time.Since(start).Round(time.Millisecond))
	return ref, nil
}

// bindMountsWork probes once whether a bind mount of a host directory
// reaches the engine: it creates (never starts) a container of image with
// a temp dir holding a marker file bound in, and copies the marker out.
func (d *Docker) bindMountsWork(ctx context.Context, image string) bool {
	d.probeMu.Lock()
	defer d.probeMu.Unlock()
	if d.probed {
		return d.bindWorks
	}
	works, err := d.probeBind(ctx, image)
	if err != nil {
		if ctx.Err() != nil {
			return true // not decided; the run fails on ctx anyway
		}
		d.logger.Warn("bind mounts do not reach the docker engine: copying work dirs in and out", "reason", err)
	}
	d.probed, d.bindWorks = true, works
	return works
}

func (d *Docker) probeBind(ctx context.Context, image string) (bool, error) {
	dir, err := os.MkdirTemp("", "gpuattest-bindprobe-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	marker := randomHex(16)
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte(marker), 0o644); err != nil {
		return false, err
	}
	cname := d.prefix + "probe-" + randomHex(8)
	defer d.remove(cname)
	if out, err := d.cli(ctx, nil, "create", "--name", cname, "--network", "none", "--volume", dir+":/gpuattest-probe:ro", image, "probe"); err != nil {
		return false, fmt.Errorf("creating the probe container: %w: %s", err, out)
	}
	out, err := d.cli(ctx, nil, "cp", cname+":/gpuattest-probe/marker", "-")
	if err != nil {
		return false, fmt.Errorf("reading the marker: %w: %s", err, out)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	if _, err := tr.Next(); err != nil {
		return false, fmt.Errorf("reading the marker: %w", err)
	}
	got, _ := io.ReadAll(tr)
	if string(got) != marker {
		return false, errors.New("the marker file seen by the engine differs")
	}
	return true, nil
}

// remove force-removes a container, ignoring "no such container".
func (d *Docker) remove(cname string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := d.cli(ctx, nil, "rm", "--force", cname)
	if err != nil && !bytes.Contains(bytes.ToLower(out), []byte("no such container")) {
		d.logger.Warn("removing container", "container", cname, "err", err, "output", string(out))
	}
}

// cli runs the docker CLI and returns its stdout (stderr on failure).
func (d *Docker) cli(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.Bytes(), err
	}
	return stdout.Bytes(), nil
}

// writeEnvFile writes env for docker --env-file (mode 0600). Docker's
// format has no quoting, so a value with a newline cannot be passed.
func writeEnvFile(p string, env []string) error {
	var b strings.Builder
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t#") {
			return fmt.Errorf("docker runner: environment entry %q is not KEY=VALUE", kv)
		}
		if strings.ContainsAny(kv, "\r\n") {
			return fmt.Errorf("docker runner: the value of %s contains a newline, which docker --env-file cannot carry\nhint: pass it in a file in the work dir instead", k)
		}
		b.WriteString(kv)
		b.WriteByte('\n')
	}
	return os.WriteFile(p, []byte(b.String()), 0o600)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = t.buf[len(t.buf)-8<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
