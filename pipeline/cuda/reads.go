package cuda

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Bounds on nvcc's dependency output.
const (
	// MaxDepOutput caps the bytes of one nvcc -M output.
	MaxDepOutput = 16 << 20
	// MaxReads caps the files a build step may list as read.
	MaxReads = 10000
)

// DepArgs is the argv that lists the files job's compilation reads: the
// job's own argv with nvcc's dependency generation (-M, to stdout) in
// place of its output mode and -o, so that the same flags, defines and
// gencode targets select the same headers.
func DepArgs(j Job) []string {
	args := []string{j.Args[0], "-M"}
	for i := 1; i < len(j.Args); i++ {
		a := j.Args[i]
		switch {
		case i == 1 && strings.HasPrefix(a, "-") && (a == "-fatbin" || a == "-cubin" || a == "-ptx" || a == "-c"):
			continue
		case a == "-o" && i+1 < len(j.Args):
			i++
			continue
		}
		args = append(args, a)
	}
	return args
}

// ParseDeps reads make-style dependency rules ("target: dep dep \"
// continued lines, "\ " for a space, "$$" for "$") and returns the
// prerequisites in order, without duplicates.
func ParseDeps(data []byte) ([]string, error) {
	text := strings.ReplaceAll(string(data), "\\\r\n", " ")
	text = strings.ReplaceAll(text, "\\\n", " ")
	var out []string
	seen := map[string]bool{}
	for ln, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		_, rest, ok := cutRule(line)
		if !ok {
			return nil, fmt.Errorf("dependency output line %d: expected \"target: prerequisites\"", ln+1)
		}
		for _, w := range splitDepWords(rest) {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out, nil
}

// cutRule splits a rule at the first ':' followed by a space or the end
// of the line (a Windows drive letter never occurs here).
func cutRule(line string) (string, string, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] == ':' && (i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '\t') {
			return line[:i], line[i+1:], true
		}
	}
	return "", "", false
}

// splitDepWords splits prerequisites at unescaped blanks.
func splitDepWords(s string) []string {
	var words []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			words = append(words, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '#'):
			b.WriteByte(s[i+1])
			i++
		case c == '$' && i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
		case c == ' ' || c == '\t':
			flush()
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return words
}

// limitedBuffer keeps at most max bytes and remembers that more came.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); len(p) > room {
		l.over = true
		l.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.buf.Write(p)
}

// reads runs nvcc's dependency generation for every job through the
// step's runner and returns every file the compilations read, hashed:
// files in the work dir by relative path (read through it, never out of
// it), other files on this machine by absolute path for the host runner,
// and for container runners marked as in the image (its digest pins
// them). A -ccbin that names a file in the work dir is read too.
func (b *Build) reads(ctx context.Context, s *step.Context, env []string, jobs []Job) ([]step.Read, error) {
	deps := make([][]string, len(jobs))
	errs := make([]error, len(jobs))
	forEach(b.Jobs, len(jobs), func(i int) {
		so, se := limitedBuffer{max: MaxDepOutput}, limitedBuffer{max: 64 << 10}
		args := DepArgs(jobs[i])
		res, err := s.Runner.Run(ctx, &runner.Command{Args: args, Dir: s.WorkDir, Env: env, Stdout: &so, Stderr: &se, Image: s.Image})
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("listing the files nvcc reads for %s: %w", jobs[i].Source, err)
		case res.ExitCode != 0:
			errs[i] = fmt.Errorf("listing the files nvcc reads for %s: %s exited %d: %s", jobs[i].Source, shellQuote(args), res.ExitCode, strings.TrimSpace(se.buf.String()))
		case so.over:
			errs[i] = fmt.Errorf("listing the files nvcc reads for %s: more than %d bytes of dependency output", jobs[i].Source, MaxDepOutput)
		default:
			deps[i], errs[i] = ParseDeps(so.buf.Bytes())
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var paths []string
	for _, d := range deps {
		paths = append(paths, d...)
	}
	if cc := ccbin(s.Step.Flags); cc != "" && !filepath.IsAbs(cc) && strings.ContainsRune(cc, '/') {
		paths = append(paths, cc)
	}
	return hashReads(s.WorkDir, s.Runner.Name() == "host", paths)
}

// ccbin is the value of -ccbin / --compiler-bindir in flags, or "".
func ccbin(flags []string) string {
	for i, f := range flags {
		for _, name := range []string{"-ccbin", "--compiler-bindir"} {
			if f == name && i+1 < len(flags) {
				return flags[i+1]
			}
			if v, ok := strings.CutPrefix(f, name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// hashReads hashes the files paths name (relative to dir, or absolute),
// once each, sorted by path.
func hashReads(dir string, host bool, paths []string) ([]step.Read, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	byPath := map[string]step.Read{}
	for _, p := range paths {
		if len(byPath) > MaxReads {
			return nil, fmt.Errorf("the build read more than %d files", MaxReads)
		}
		abs := filepath.Clean(p)
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(dir, abs)
		}
		r, err := hashRead(root, dir, abs, host)
		if err != nil {
			return nil, err
		}
		byPath[r.Path] = r
	}
	out := make([]step.Read, 0, len(byPath))
	for _, r := range byPath {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b step.Read) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// hashRead hashes one file the build read.
func hashRead(root *os.Root, dir, abs string, host bool) (step.Read, error) {
	if rel, err := filepath.Rel(dir, abs); err == nil && filepath.IsLocal(rel) {
		f, err := root.Open(rel)
		if err == nil {
			defer f.Close()
			sum, _, err := digest.Reader(f)
			if err != nil {
				return step.Read{}, fmt.Errorf("hashing %s, read by the build: %w", rel, err)
			}
			return step.Read{Path: filepath.ToSlash(rel), SHA256: sum}, nil
		}
		if !host {
			// A link out of the work dir, into the image.
			return step.Read{Path: filepath.ToSlash(rel), InImage: true}, nil
		}
	}
	if !host {
		return step.Read{Path: filepath.ToSlash(abs), InImage: true}, nil
	}
	sum, _, err := digest.File(abs)
	if err != nil {
		return step.Read{}, fmt.Errorf("hashing %s, read by the build: %w", abs, err)
	}
	return step.Read{Path: filepath.ToSlash(abs), SHA256: sum}, nil
}

// keyFacts are what a cuda-build's cache key covers beyond its spec and
// inputs: the toolchain its runner finds, host compiler included.
type keyFacts struct {
	NVCC         string     `json:"nvcc"`
	NVCCBinary   string     `json:"nvcc_binary,omitempty"`
	Tools        []ToolFile `json:"tools"`
	HostCompiler string     `json:"host_compiler"`
	HostSHA256   string     `json:"host_compiler_sha256"`
}

// CacheKeyFacts returns the digests of the toolchain s's runner runs
// (nvcc, the tools it drives and the host compiler, -ccbin's target
// included), so that no cached build is restored for another toolchain.
// It fails when they cannot be taken; the step then runs uncached.
func (b *Build) CacheKeyFacts(ctx context.Context, s *step.Context) (any, error) {
	env, _, err := b.nvccEnv(ctx, s)
	if err != nil {
		return nil, err
	}
	tc := b.fingerprint(ctx, s, env)
	if tc == nil {
		return nil, errors.New("the toolchain could not be fingerprinted (see the log)")
	}
	inTree := tc.HostCompiler != "" && !filepath.IsAbs(tc.HostCompiler) && strings.Contains(tc.HostCompiler, "/")
	if tc.NVCCSHA256 == "" || (tc.HostCompiler != "" && !inTree && tc.HostCompilerSHA256 == "") {
		return nil, errors.New("the toolchain's digests are incomplete")
	}
	return keyFacts{NVCC: tc.NVCCSHA256, NVCCBinary: tc.NVCCBinarySHA256, Tools: tc.Tools, HostCompiler: cmp.Or(tc.HostCompilerPath, tc.HostCompiler), HostSHA256: tc.HostCompilerSHA256}, nil
}

var _ step.KeyFacter = (*Build)(nil)
