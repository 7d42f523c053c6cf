package cuda

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// Inspection is what a built file holds, as cuobjdump sees it.
type Inspection struct {
	// Path is the file inspected, as given.
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file's bytes.
	SHA256 string `json:"sha256"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// SASS lists the architectures of the embedded cubins (sm_80, ...),
	// sorted and unique.
	SASS []string `json:"sass"`
	// PTX lists the virtual architectures of embedded PTX (compute_90,
	// ...), sorted and unique.
	PTX []string `json:"ptx"`
	// Cubins are the embedded cubins, in cuobjdump's order.
	Cubins []Cubin `json:"cubins"`
}

// Cubin is one embedded device ELF.
type Cubin struct {
	// Name is the name cuobjdump gave it (e.g. vector_add.1.sm_80.cubin).
	Name string `json:"name"`
	// Arch is the SASS architecture read from the ELF header (sm_80).
	Arch string `json:"arch"`
	// SHA256 is the hex sha256 of the cubin's bytes.
	SHA256 string `json:"sha256"`
	// Size is the cubin's size in bytes.
	Size int64 `json:"size"`
}

// CubinDigests returns arch -> sha256 of each embedded cubin; archs with
// more than one cubin (executables of several translation units) get
// their digests joined with commas, in cuobjdump's order.
func (in *Inspection) CubinDigests() map[string]string {
	m := map[string]string{}
	for _, c := range in.Cubins {
		if m[c.Arch] != "" {
			m[c.Arch] += "," + c.SHA256
		} else {
			m[c.Arch] = c.SHA256
		}
	}
	return m
}

var (
	listELFRE = regexp.MustCompile(`(?m)^ELF file\s+[0-9]+:\s+(\S+)\s*$`)
	listPTXRE = regexp.MustCompile(`(?m)^PTX file\s+[0-9]+:\s+(\S+)\s*$`)
	nameArch  = regexp.MustCompile(`\.(sm|compute)_([0-9]{2,3}[a-z]?)\.(?:cubin|ptx)$`)
	ptxTarget = regexp.MustCompile(`(?m)^\s*\.target\s+sm_([0-9]{2,3}[a-z]?)`)
)

// emCUDA is the ELF machine of NVIDIA device code.
const emCUDA = 190

// Inspect lists the SASS and PTX architectures embedded in path (a fatbin,
// cubin, object, executable or PTX file) and digests each embedded cubin.
// cuobjdump runs through r (so inside the step's image for container
// runners): --list-elf and --list-ptx, then --extract-elf all into a
// temporary directory that is removed afterwards. A PTX text file is read
// directly. A file without device code yields empty lists.
func Inspect(ctx context.Context, r runner.Runner, path string, opts ...Option) (*Inspection, error) {
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
	in := &Inspection{Path: path, SHA256: sum(data), Size: int64(len(data)), SASS: []string{}, PTX: []string{}, Cubins: []Cubin{}}
	if isPTXText(data) {
		for _, m := range ptxTarget.FindAllStringSubmatch(string(data), -1) {
			in.PTX = appendUnique(in.PTX, "compute_"+m[1])
		}
		sort.Strings(in.PTX)
		return in, nil
	}
	if isELF(data) && elfMachine(data) == emCUDA {
		// A bare cubin: cuobjdump would list it under an odd name.
		arch, err := cubinArch(data)
		if err != nil {
			return nil, fmt.Errorf("inspecting %s: %w", path, err)
		}
		in.SASS = []string{arch}
		in.Cubins = []Cubin{{Name: filepath.Base(path), Arch: arch, SHA256: in.SHA256, Size: in.Size}}
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
	ro := []string{filepath.Dir(abs)}

	var stdout, stderr bytes.Buffer
	res, err := r.Run(ctx, &runner.Command{Args: []string{"cuobjdump", "--list-elf", "--list-ptx", abs}, Dir: tmp, Env: o.env, Stdout: &stdout, Stderr: &stderr, Image: o.image, ReadOnly: ro})
	if err != nil {
		return nil, fmt.Errorf("running cuobjdump on %s: %w", path, err)
	}
	if res.ExitCode != 0 {
		if strings.Contains(stderr.String()+stdout.String(), "does not contain device code") {
			return in, nil
		}
		return nil, fmt.Errorf("cuobjdump --list-elf --list-ptx %s: exit %d: %s", path, res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	listed := map[string]bool{}
	for _, m := range listELFRE.FindAllStringSubmatch(stdout.String(), -1) {
		listed[m[1]] = true
	}
	for _, m := range listPTXRE.FindAllStringSubmatch(stdout.String(), -1) {
		a := nameArch.FindStringSubmatch(m[1])
		if a == nil {
			return nil, fmt.Errorf("cuobjdump listed PTX %q in %s: cannot tell its architecture", m[1], path)
		}
		in.PTX = appendUnique(in.PTX, "compute_"+a[2])
	}
	sort.Strings(in.PTX)
	if len(listed) == 0 {
		return in, nil
	}

	stdout.Reset()
	stderr.Reset()
	res, err = r.Run(ctx, &runner.Command{Args: []string{"cuobjdump", "--extract-elf", "all", abs}, Dir: tmp, Env: o.env, Stdout: &stdout, Stderr: &stderr, Image: o.image, ReadOnly: ro})
	if err != nil {
		return nil, fmt.Errorf("running cuobjdump --extract-elf on %s: %w", path, err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("cuobjdump --extract-elf all %s: exit %d: %s", path, res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	extracted := regexp.MustCompile(`(?m)^Extracting ELF file\s+[0-9]+:\s+(\S+)\s*$`).FindAllStringSubmatch(stdout.String(), -1)
	for _, m := range extracted {
		name := m[1]
		if strings.ContainsAny(name, `/\`) || name == ".." {
			return nil, fmt.Errorf("cuobjdump extracted %q from %s: not a plain file name", name, path)
		}
		b, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			return nil, fmt.Errorf("reading cubin %s extracted from %s: %w", name, path, err)
		}
		arch, err := cubinArch(b)
		if err != nil {
			return nil, fmt.Errorf("cubin %s extracted from %s: %w", name, path, err)
		}
		if a := nameArch.FindStringSubmatch(name); a != nil && "sm_"+a[2] != arch {
			return nil, fmt.Errorf("cubin %s extracted from %s: its ELF header says %s", name, path, arch)
		}
		in.Cubins = append(in.Cubins, Cubin{Name: name, Arch: arch, SHA256: sum(b), Size: int64(len(b))})
		in.SASS = appendUnique(in.SASS, arch)
	}
	if len(in.Cubins) != len(listed) {
		return nil, fmt.Errorf("cuobjdump listed %d cubins in %s but extracted %d", len(listed), path, len(in.Cubins))
	}
	sort.Strings(in.SASS)
	return in, nil
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

// cubinArch reads the SASS architecture of a device ELF from e_flags.
func cubinArch(b []byte) (string, error) {
	f, err := openELF(b)
	if err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	if f.Machine != emCUDA {
		return "", fmt.Errorf("ELF machine %d is not NVIDIA CUDA (190)", f.Machine)
	}
	// e_flags sits at offset 48 in a 64-bit header, 36 in a 32-bit one;
	// its low byte is the SM number (EF_CUDA_SM).
	off := 48
	if f.Class == elf.ELFCLASS32 {
		off = 36
	}
	if len(b) < off+4 {
		return "", fmt.Errorf("truncated ELF header")
	}
	flags := f.ByteOrder.Uint32(b[off:])
	sm := flags & 0xff
	if sm == 0 {
		return "", fmt.Errorf("ELF flags 0x%x name no SM architecture", flags)
	}
	return fmt.Sprintf("sm_%d", sm), nil
}

func isELF(b []byte) bool { return len(b) > 20 && string(b[:4]) == "\x7fELF" }

func elfMachine(b []byte) uint16 {
	f, err := openELF(b)
	if err != nil {
		return 0
	}
	return uint16(f.Machine)
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
	if contains(ss, s) {
		return ss
	}
	return append(ss, s)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// openELF parses b as ELF. NVIDIA cubins put the CUDA ELF ABI version
// (e.g. 118) in e_version, which debug/elf refuses; the parse uses a copy
// with e_version set to EV_CURRENT, leaving every other byte as it is.
func openELF(b []byte) (*elf.File, error) {
	if len(b) >= 24 && b[6] == 1 {
		var v uint32
		switch b[5] {
		case 1: // little endian
			v = uint32(b[20]) | uint32(b[21])<<8 | uint32(b[22])<<16 | uint32(b[23])<<24
		case 2:
			v = uint32(b[23]) | uint32(b[22])<<8 | uint32(b[21])<<16 | uint32(b[20])<<24
		}
		if v != 1 {
			c := append([]byte(nil), b...)
			if b[5] == 1 {
				c[20], c[21], c[22], c[23] = 1, 0, 0, 0
			} else {
				c[20], c[21], c[22], c[23] = 0, 0, 0, 1
			}
			b = c
		}
	}
	return elf.NewFile(bytes.NewReader(b))
}
