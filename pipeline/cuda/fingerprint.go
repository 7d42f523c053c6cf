package cuda

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// Toolchain identifies the CUDA toolchain a build used.
type Toolchain struct {
	// NVCC is the nvcc found in PATH (on Debian a wrapper script).
	NVCC string `json:"nvcc"`
	// NVCCSHA256 is the hex sha256 of NVCC.
	NVCCSHA256 string `json:"nvcc_sha256"`
	// NVCCBinary is the nvcc driver binary nvcc reports as its home
	// (_HERE_/nvcc); equal to NVCC when NVCC is the binary itself.
	NVCCBinary string `json:"nvcc_binary,omitempty"`
	// NVCCBinarySHA256 is the hex sha256 of NVCCBinary.
	NVCCBinarySHA256 string `json:"nvcc_binary_sha256,omitempty"`
	// NVCCVersion is the full output of nvcc --version.
	NVCCVersion string `json:"nvcc_version"`
	// Release is the CUDA release, e.g. "11.8".
	Release string `json:"release,omitempty"`
	// HostCompiler is the host compiler nvcc invokes (e.g. gcc).
	HostCompiler string `json:"host_compiler,omitempty"`
	// HostCompilerVersion is the first line of its --version output.
	HostCompilerVersion string `json:"host_compiler_version,omitempty"`
	// HostCompilerPath is the file HostCompiler resolves to (symbolic
	// links followed), where the runner runs it; empty for a -ccbin in
	// the work dir, which the build's reads cover.
	HostCompilerPath string `json:"host_compiler_path,omitempty"`
	// HostCompilerSHA256 is the hex sha256 of HostCompilerPath.
	HostCompilerSHA256 string `json:"host_compiler_sha256,omitempty"`
	// Tools are the binaries nvcc drives (cicc, ptxas, fatbinary) as
	// nvcc finds them, with their digests.
	Tools []ToolFile `json:"tools,omitempty"`
}

// ToolFile is one binary of the toolchain.
type ToolFile struct {
	// Name is the tool's name (cicc, ptxas, fatbinary).
	Name string `json:"name"`
	// Path is where nvcc finds it.
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file.
	SHA256 string `json:"sha256"`
}

// DrivenTools are the binaries nvcc runs whose digests Fingerprint
// records.
var DrivenTools = []string{"cicc", "ptxas", "fatbinary"}

// findTools is a shell script that prints "name path" for each tool in
// DrivenTools that nvcc would run: cicc from $CICC_PATH when set, the
// others (and cicc otherwise) from nvcc's PATH.
const findTools = `for t in cicc ptxas fatbinary; do p=""; if [ "$t" = cicc ] && [ -n "$CICC_PATH" ] && [ -x "$CICC_PATH/cicc" ]; then p="$CICC_PATH/cicc"; else p=$(command -v "$t") || p=""; fi; if [ -n "$p" ]; then printf '%s %s\n' "$t" "$p"; fi; done`

var (
	releaseRE = lazyregexp.New(`release ([0-9]+\.[0-9]+)`)
	dryVarRE  = lazyregexp.New(`(?m)^#\$ ([A-Za-z_]+)=(.*)$`)
	dryCmdRE  = lazyregexp.New(`(?m)^#\$ "?([^" =]+)"? `)
)

var hostCompilers = map[string]bool{"gcc": true, "g++": true, "cc": true, "c++": true, "clang": true, "clang++": true, "icpx": true, "nvc++": true}

// Fingerprint identifies the CUDA toolchain r runs: nvcc's path and
// digest, nvcc --version, and the host compiler nvcc would invoke (found
// with nvcc --dryrun, honouring -ccbin given by [WithNVCCFlags]) with its
// version. Every probe runs through r, so for container runners it
// describes the image's toolchain.
func Fingerprint(ctx context.Context, r runner.Runner, opts ...Option) (*Toolchain, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	dir := o.tmpDir
	if dir == "" {
		dir = os.TempDir()
	}
	run := func(env []string, args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		res, err := r.Run(ctx, &runner.Command{Args: args, Dir: dir, Env: env, Stdout: &stdout, Stderr: &stderr, Image: o.image})
		if err != nil {
			return "", "", fmt.Errorf("running %s: %w", strings.Join(args, " "), err)
		}
		if res.ExitCode != 0 {
			return stdout.String(), stderr.String(), fmt.Errorf("%s: exit %d: %s", strings.Join(args, " "), res.ExitCode, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), stderr.String(), nil
	}
	tc := &Toolchain{}
	out, _, err := run(o.env, "sh", "-c", "command -v nvcc")
	if err != nil {
		return nil, fmt.Errorf("finding nvcc: %w\nhint: install the CUDA toolkit (Debian: apt-get install nvidia-cuda-toolkit) or use an image that has it", err)
	}
	tc.NVCC = strings.TrimSpace(out)
	if out, _, err = run(o.env, "nvcc", "--version"); err != nil {
		return nil, err
	}
	tc.NVCCVersion = strings.TrimSpace(out)
	if m := releaseRE.FindStringSubmatch(out); m != nil {
		tc.Release = m[1]
	}
	// A -ccbin in the work dir is relative to the build's directory, not
	// this one, and nvcc runs it even for --dryrun: it is left out here
	// (the build's reads hash it), so the source's code never runs in a
	// probe.
	cc := ccbin(o.nvccFlags)
	inTree := cc != "" && !path.IsAbs(cc) && strings.Contains(cc, "/")
	flags := o.nvccFlags
	if inTree {
		flags = withoutCCBin(flags)
	}
	dry := append([]string{"nvcc", "--dryrun", "-fatbin", "-gencode", "arch=compute_80,code=sm_80"}, flags...)
	dry = append(dry, "-o", "gpuattest-fingerprint.fatbin", "gpuattest-fingerprint.cu")
	dout, derr, err := run(o.env, dry...)
	if err != nil {
		return nil, fmt.Errorf("asking nvcc for its host compiler: %w", err)
	}
	trace := dout + derr
	vars := map[string]string{}
	for _, m := range dryVarRE.FindAllStringSubmatch(trace, -1) {
		vars[m[1]] = strings.TrimSpace(m[2])
	}
	if here := vars["_HERE_"]; here != "" {
		tc.NVCCBinary = path.Join(here, "nvcc")
	}
	for _, m := range dryCmdRE.FindAllStringSubmatch(trace, -1) {
		if hostCompilers[path.Base(m[1])] || strings.Contains(path.Base(m[1]), "g++") || strings.Contains(path.Base(m[1]), "gcc") {
			tc.HostCompiler = m[1]
			break
		}
	}
	// -ccbin naming a file, whatever its name, is the host compiler.
	if cc != "" && !strings.HasSuffix(cc, "/") && (tc.HostCompiler == "" || !strings.HasPrefix(tc.HostCompiler, strings.TrimSuffix(cc, "/")+"/")) {
		tc.HostCompiler = cc
	}
	if err := tc.digest(run, o.env, vars); err != nil {
		return nil, err
	}
	if inTree {
		// A compiler in the work dir: the source's own code, which is
		// neither run here nor digested here (the build's reads hash
		// it, from the work dir it is relative to).
		return tc, nil
	}
	if err := tc.hostCompiler(run, o.env, vars); err != nil {
		return nil, err
	}
	return tc, nil
}

// hostCompiler resolves the host compiler with nvcc's PATH (from its
// --dryrun variables vars) and records the file it is, its digest and
// its version.
func (tc *Toolchain) hostCompiler(run probe, env []string, vars map[string]string) error {
	if tc.HostCompiler == "" {
		return nil
	}
	if p := vars["PATH"]; p != "" {
		env = setEnv(env, "PATH", p)
	}
	// Through sh so the lookup uses nvcc's PATH, not this process's.
	out, _, err := run(env, "sh", "-c", `p=$(command -v "$0") || exit 3; p=$(readlink -f "$p") || exit 3; sha256sum "$p"`, tc.HostCompiler)
	if err != nil {
		return fmt.Errorf("digesting the host compiler %s: %w", tc.HostCompiler, err)
	}
	if f := strings.Fields(out); len(f) == 2 {
		tc.HostCompilerSHA256, tc.HostCompilerPath = f[0], strings.TrimPrefix(f[1], "*")
	}
	if out, _, err = run(env, "sh", "-c", `exec "$0" --version`, tc.HostCompiler); err != nil {
		return fmt.Errorf("asking the host compiler for its version: %w", err)
	}
	tc.HostCompilerVersion, _, _ = strings.Cut(strings.TrimSpace(out), "\n")
	return nil
}

// withoutCCBin returns flags less -ccbin / --compiler-bindir and their
// values.
func withoutCCBin(flags []string) []string {
	var out []string
	for i := 0; i < len(flags); i++ {
		f := flags[i]
		if f == "-ccbin" || f == "--compiler-bindir" {
			i++
			continue
		}
		if strings.HasPrefix(f, "-ccbin=") || strings.HasPrefix(f, "--compiler-bindir=") {
			continue
		}
		out = append(out, f)
	}
	return out
}

// setEnv returns env with key set to val (replacing any earlier value).
func setEnv(env []string, key, val string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+val)
}

// probe runs one command of Fingerprint: stdout, stderr and an error
// for a failure or a non-zero exit.
type probe func(env []string, args ...string) (string, string, error)

// digest finds the tools nvcc drives (with nvcc's PATH and CICC_PATH from
// its --dryrun variables vars) and records the sha256 of them and of nvcc.
func (tc *Toolchain) digest(run probe, env []string, vars map[string]string) error {
	files := []string{tc.NVCC}
	if tc.NVCCBinary != "" && tc.NVCCBinary != tc.NVCC {
		files = append(files, tc.NVCCBinary)
	}
	toolEnv := env
	for _, k := range []string{"PATH", "CICC_PATH"} {
		if v := vars[k]; v != "" {
			toolEnv = setEnv(toolEnv, k, v)
		}
	}
	out, _, err := run(toolEnv, "sh", "-c", findTools)
	if err != nil {
		return fmt.Errorf("finding the tools nvcc drives: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, p, ok := strings.Cut(line, " "); ok && p != "" {
			tc.Tools = append(tc.Tools, ToolFile{Name: name, Path: p})
			files = append(files, p)
		}
	}
	if out, _, err = run(env, append([]string{"sha256sum"}, files...)...); err != nil {
		return fmt.Errorf("digesting nvcc: %w", err)
	}
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			sums[strings.TrimPrefix(f[1], "*")] = f[0]
		}
	}
	tc.NVCCSHA256 = sums[tc.NVCC]
	for i := range tc.Tools {
		tc.Tools[i].SHA256 = sums[tc.Tools[i].Path]
	}
	if tc.NVCCBinary == tc.NVCC {
		tc.NVCCBinary = ""
	} else {
		tc.NVCCBinarySHA256 = sums[tc.NVCCBinary]
	}
	return nil
}
