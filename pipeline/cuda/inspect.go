package cuda

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

var (
	listELFRE = lazyregexp.New(`(?m)^ELF file\s+[0-9]+:\s+(\S+)\s*$`)
	listPTXRE = lazyregexp.New(`(?m)^PTX file\s+[0-9]+:\s+(\S+)\s*$`)
	nameArch  = lazyregexp.New(`\.(sm|compute)_([0-9]{2,3}[a-z]?)\.(?:cubin|ptx)$`)
	ptxTarget = lazyregexp.New(`(?m)^\s*\.target\s+sm_([0-9]{2,3}[a-z]?)`)
	// extractedRE is a cubin cuobjdump --extract-elf wrote.
	extractedRE = lazyregexp.New(`(?m)^Extracting ELF file\s+[0-9]+:\s+(\S+)\s*$`)
)

// Inspect lists the SASS and PTX architectures embedded in path (a fatbin,
// cubin, object, executable or PTX file) and digests each embedded cubin.
// cuobjdump runs through r (so inside the step's image for container
// runners; nil runs it on the host): --list-elf and --list-ptx, then --extract-elf all into a
// temporary directory that is removed afterwards. A PTX text file is read
// directly. A file without device code yields empty lists.
func Inspect(ctx context.Context, r runner.Runner, path string, opts ...Option) (*runtypes.Inspection, error) {
	if r == nil {
		r = &runner.Host{}
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: %w", path, err)
	}
	in := &runtypes.Inspection{Path: path, SHA256: sum(data), Size: int64(len(data)), SASS: []string{}, PTX: []string{}, Cubins: []runtypes.Cubin{}}
	switch {
	case isPTXText(data):
		for _, m := range ptxTarget.FindAllStringSubmatch(string(data), -1) {
			in.PTX = appendUnique(in.PTX, "compute_"+m[1])
		}
		sortArchs(in.PTX)
		return in, nil
	case isELF(data) && elfMachine(data) == emCUDA:
		// A bare cubin: cuobjdump would list it under an odd name.
		arch, err := cubinArch(data)
		if err != nil {
			return nil, fmt.Errorf("inspecting %s: %w", path, err)
		}
		in.SASS = []string{arch}
		in.Cubins = []runtypes.Cubin{{Name: filepath.Base(path), Arch: arch, SHA256: in.SHA256, Size: in.Size}}
		return in, nil
	}
	if o.tmpDir != "" {
		if err := os.MkdirAll(o.tmpDir, 0o755); err != nil {
			return nil, fmt.Errorf("inspecting %s: %w", path, err)
		}
	}
	tmp, err := os.MkdirTemp(o.tmpDir, "gpuattest-inspect-")
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	c := &cuobjdump{r: r, o: o, abs: abs, path: path, tmp: tmp}
	if err := c.inspect(ctx, in); err != nil {
		return nil, err
	}
	return in, nil
}

// cuobjdump runs cuobjdump on one file (abs, named path in messages) in
// the directory tmp, which it extracts cubins into.
type cuobjdump struct {
	r              runner.Runner
	o              options
	abs, path, tmp string
}

// run runs cuobjdump with args and the file; it fails unless cuobjdump
// exits 0, saying so with its stderr, or when its output says the file
// holds no device code (noCode).
func (c *cuobjdump) run(ctx context.Context, args ...string) (stdout string, noCode bool, err error) {
	var so, se bytes.Buffer
	argv := append(append([]string{"cuobjdump"}, args...), c.abs)
	res, err := c.r.Run(ctx, &runner.Command{Args: argv, Dir: c.tmp, Env: c.o.env, Stdout: &so, Stderr: &se, Image: c.o.image, ReadOnly: []string{filepath.Dir(c.abs)}})
	if err != nil {
		return "", false, fmt.Errorf("running cuobjdump %s on %s: %w", args[0], c.path, err)
	}
	if res.ExitCode != 0 {
		if strings.Contains(se.String()+so.String(), "does not contain device code") {
			return "", true, nil
		}
		return "", false, fmt.Errorf("cuobjdump %s %s: exit %d: %s", strings.Join(args, " "), c.path, res.ExitCode, strings.TrimSpace(se.String()))
	}
	return so.String(), false, nil
}

// inspect lists the file's PTX and cubins into in, then extracts the
// cubins and reads each one's architecture from its ELF header.
func (c *cuobjdump) inspect(ctx context.Context, in *runtypes.Inspection) error {
	out, noCode, err := c.run(ctx, "--list-elf", "--list-ptx")
	if err != nil || noCode {
		return err
	}
	listed := map[string]bool{}
	for _, m := range listELFRE.FindAllStringSubmatch(out, -1) {
		listed[m[1]] = true
	}
	for _, m := range listPTXRE.FindAllStringSubmatch(out, -1) {
		a := nameArch.FindStringSubmatch(m[1])
		if a == nil {
			return fmt.Errorf("cuobjdump listed PTX %q in %s: cannot tell its architecture", m[1], c.path)
		}
		in.PTX = appendUnique(in.PTX, "compute_"+a[2])
	}
	sortArchs(in.PTX)
	if len(listed) == 0 {
		return nil
	}
	if out, _, err = c.run(ctx, "--extract-elf", "all"); err != nil {
		return err
	}
	for _, m := range extractedRE.FindAllStringSubmatch(out, -1) {
		cb, err := c.cubin(m[1])
		if err != nil {
			return err
		}
		in.Cubins = append(in.Cubins, cb)
		in.SASS = appendUnique(in.SASS, cb.Arch)
	}
	if len(in.Cubins) != len(listed) {
		return fmt.Errorf("cuobjdump listed %d cubins in %s but extracted %d", len(listed), c.path, len(in.Cubins))
	}
	sortArchs(in.SASS)
	return nil
}

// cubin reads the cubin cuobjdump extracted as name.
func (c *cuobjdump) cubin(name string) (runtypes.Cubin, error) {
	if strings.ContainsAny(name, `/\`) || name == ".." {
		return runtypes.Cubin{}, fmt.Errorf("cuobjdump extracted %q from %s: not a plain file name", name, c.path)
	}
	b, err := os.ReadFile(filepath.Join(c.tmp, name))
	if err != nil {
		return runtypes.Cubin{}, fmt.Errorf("reading cubin %s extracted from %s: %w", name, c.path, err)
	}
	arch, err := namedCubinArch(b, name)
	if err != nil {
		return runtypes.Cubin{}, fmt.Errorf("cubin %s extracted from %s: %w", name, c.path, err)
	}
	return runtypes.Cubin{Name: name, Arch: arch, SHA256: sum(b), Size: int64(len(b))}, nil
}

// Option configures [Inspect] and [Fingerprint].
type Option func(*options) error

type options struct {
	env       []string
	image     image.Pinned
	tmpDir    string
	nvccFlags []string
}

func applyOptions(opts []Option) (options, error) {
	o := options{env: os.Environ()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithNVCCFlags passes flags that change the toolchain (such as -ccbin
// g++-11) to the nvcc invocations [Fingerprint] makes.
func WithNVCCFlags(flags []string) Option {
	return func(o *options) error { o.nvccFlags = append([]string(nil), flags...); return nil }
}

// WithEnv sets the environment cuobjdump runs with (default: this process's).
func WithEnv(env []string) Option {
	return func(o *options) error { o.env = env; return nil }
}

// WithImage runs cuobjdump (and Fingerprint's probes) in the pinned image
// img, for container runners.
func WithImage(img image.Pinned) Option {
	return func(o *options) error { o.image = img; return nil }
}

// WithTempDir puts the extraction directory under dir (default: the
// system's temporary directory). Container runners bind it at the same path.
func WithTempDir(dir string) Option {
	return func(o *options) error {
		if dir != "" && !filepath.IsAbs(dir) {
			return fmt.Errorf("temp dir %q: expected an absolute path", dir)
		}
		o.tmpDir = dir
		return nil
	}
}

// isPTXText reports whether b looks like a PTX source file.
func isPTXText(b []byte) bool {
	if len(b) == 0 || bytes.IndexByte(b[:min(len(b), 4096)], 0) >= 0 {
		return false
	}
	head := string(b[:min(len(b), 8192)])
	return strings.Contains(head, ".version") && ptxTarget.MatchString(head)
}

func appendUnique(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// sortArchs sorts architecture names (sm_80, compute_90a) by compute
// capability, then suffix; names that do not parse sort last, by name.
func sortArchs(names []string) {
	slices.SortFunc(names, func(a, b string) int {
		ta, _, errA := pipeline.ParseCode(a)
		tb, _, errB := pipeline.ParseCode(b)
		switch {
		case errA == nil && errB == nil:
			if c := pipeline.CompareTargets(ta, tb); c != 0 {
				return c
			}
		case errA == nil:
			return -1
		case errB == nil:
			return 1
		}
		return strings.Compare(a, b)
	})
}
