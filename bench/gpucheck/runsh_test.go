package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
)

// bundle lays out a gpu-check bundle with the real run.sh, a run/ and a
// work/, and a gpuattest that only notes it ran and fails.
func bundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gpu-check")
	script, err := os.ReadFile(filepath.Join("..", "..", ".ci", "gpu-check", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"run.sh":              string(script),
		"run/run.json":        "{}",
		"work/gpu-check.yaml": "kind: Pipeline\n",
		"gpuattest":           "#!/bin/sh\ntouch \"$(dirname \"$0\")/gpuattest-ran\"\nexit 1\n",
		"gpucheck":            "#!/bin/sh\nexit 1\n",
		"glibc-floor":         "GLIBC_2.17\n",
		"glibcxx-floor":       "none\n",
		"arch":                machine(t) + "\n",
		// run.sh --simulated runs on the bundle's fake driver.
		"simulated/libcuda.so.1": "placeholder for the fake driver",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run.sh refuses an --out that is the bundle, holds it, or is one of its
// own files or inside one (it would be deleted), before touching
// anything; a new directory beside run/ or outside is taken.
func TestRunShOut(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bash")
	testenv.RequireTool(t, "realpath")
	for _, out := range []string{"run", "work", "./run/", "run/x", "work/kernels", ".", "..", "gpuattest", "run.sh", "check-run/../work", "@BUNDLE", "@BUNDLE/run", "@ROOT"} {
		t.Run(out, func(t *testing.T) {
			t.Parallel()
			dir := bundle(t)
			arg := strings.NewReplacer("@BUNDLE", dir, "@ROOT", dir+"/..").Replace(out)
			cmd := exec.Command("bash", filepath.Join(dir, "run.sh"), "--out", arg)
			b, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "--out") || !strings.Contains(string(b), "hint:") {
				t.Fatalf("run.sh --out %s: %v, want exit 2 and the refusal\n%s", arg, err, b)
			}
			for _, keep := range []string{"run/run.json", "work/gpu-check.yaml", "gpuattest", "run.sh"} {
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(keep))); err != nil {
					t.Errorf("run.sh --out %s removed the bundle's %s", arg, keep)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "gpuattest-ran")); err == nil {
				t.Errorf("run.sh --out %s ran gpuattest before refusing", arg)
			}
		})
	}
	for _, out := range []string{"", "check-run", "@OUTSIDE"} {
		dir := bundle(t)
		arg := strings.ReplaceAll(out, "@OUTSIDE", filepath.Join(t.TempDir(), "elsewhere"))
		// --simulated: this machine has no driver libraries, whose
		// check comes before the run on a GPU machine.
		args := []string{filepath.Join(dir, "run.sh"), "--simulated"}
		if out != "" {
			args = append(args, "--out", arg)
		}
		b, err := exec.Command("bash", args...).CombinedOutput()
		if _, statErr := os.Stat(filepath.Join(dir, "gpuattest-ran")); statErr != nil || strings.Contains(string(b), "hint: give a new directory") {
			t.Errorf("run.sh --out %q: %v, want it accepted (gpuattest run)\n%s", arg, err, b)
		}
	}
	if b, err := exec.Command("bash", filepath.Join(bundle(t), "run.sh"), "--out").CombinedOutput(); err == nil || !strings.Contains(string(b), "usage:") {
		t.Errorf("run.sh --out without DIR: %v, want the usage\n%s", err, b)
	}
}

// The gpu-check pipeline requires ECC before its GPU steps and bounds
// every GPU step's time (issue 24 items 5 and 8).
func TestGPUCheckPipelineRequiresECC(t *testing.T) {
	t.Parallel()
	p, err := pipeline.Load(filepath.Join("..", "..", ".ci", "gpu-check", "gpu-check.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Preflight == nil || p.Preflight.RequireECC == nil || !*p.Preflight.RequireECC {
		t.Errorf("preflight = %+v, want requireECC: true", p.Preflight)
	}
	for _, s := range p.Steps {
		if s.GPU && s.Timeout.IsZero() {
			t.Errorf("gpu step %s has no timeout", s.ID)
		}
	}
}

// run.sh checks the driver's libraries before anything runs: without
// libcuda or NVML it stops (exit 3, nothing run); without the PTX JIT
// it warns, naming the GPUs that need it (none with a shipped cubin), and
// goes on.
func TestRunShDriverLibraries(t *testing.T) {
	t.Parallel()
	testRunShLibraries(t, nil)
}

// A bundle whose binaries need a libstdc++ version (glibcxx-floor is not
// "none") is refused before anything runs, as is one without the file.
func TestRunShGlibcxxFloor(t *testing.T) {
	t.Parallel()
	testRunShLibraries(t, func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "glibcxx-floor"), []byte("GLIBCXX_3.4.29\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	testRunShLibraries(t, func(dir string) {
		if err := os.Remove(filepath.Join(dir, "glibcxx-floor")); err != nil {
			t.Fatal(err)
		}
	})
}

// testRunShLibraries runs run.sh on a bundle with and without libcuda;
// edit, when set, changes the bundle first and the run must be refused
// with exit 3 for the glibcxx-floor whatever the libraries.
func testRunShLibraries(t *testing.T, edit func(dir string)) {
	testenv.RequireTool(t, "bash")
	testenv.RequireTool(t, "realpath")
	for _, tc := range []struct {
		libs    []string
		code    int
		ran     bool
		message string
	}{
		{[]string{"libcuda.so.1", "libnvidia-ml.so.1"}, -1, true, "warning: libnvidia-ptxjitcompiler.so.1 not found"},
		{[]string{"libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"}, 3, false, "libcuda.so.1 not found"},
	} {
		dir := bundle(t)
		if edit != nil {
			edit(dir)
			tc.code, tc.ran, tc.message = 3, false, "glibcxx-floor"
			if len(tc.libs) < 2 || tc.libs[0] != "libcuda.so.1" {
				continue
			}
		}
		bin := filepath.Join(t.TempDir(), "bin")
		var listing strings.Builder
		for _, l := range tc.libs {
			listing.WriteString("\t" + l + " (libc6,x86-64) => /usr/lib/" + l + "\n")
		}
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "ldconfig"), []byte("#!/bin/sh\nprintf '%s' '"+listing.String()+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", filepath.Join(dir, "run.sh"), "--out", filepath.Join(t.TempDir(), "out"))
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		_, statErr := os.Stat(filepath.Join(dir, "gpuattest-ran"))
		if (tc.code >= 0 && code != tc.code) || (statErr == nil) != tc.ran || !strings.Contains(string(b), tc.message) {
			t.Errorf("libraries %v: exit %d, gpuattest ran %v, want exit %d, ran %v and %q\n%s", tc.libs, code, statErr == nil, tc.code, tc.ran, tc.message, b)
		}
	}
}

// machine is this machine's architecture as uname -m says it, the name a
// bundle's arch file holds.
func machine(t *testing.T) string {
	t.Helper()
	testenv.RequireTool(t, "uname")
	b, err := exec.Command("uname", "-m").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A bundle built for another architecture (arch), or one that records
// none, is refused before anything runs, naming both (exit 3), with and
// without --selfcheck; GPU_CHECK_QEMU=1 does not lift it for a run on a
// GPU (not --simulated).
func TestRunShArch(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "bash")
	here := machine(t)
	other := "aarch64"
	if here == other {
		other = "x86_64"
	}
	for _, tc := range []struct {
		name, arch string
		args       []string
		env        []string
		want       string
	}{
		{"other", other, []string{"--simulated"}, nil, "this bundle is for " + other + ", this machine is " + here},
		{"other selfcheck", other, []string{"--selfcheck", "--simulated"}, nil, "this bundle is for " + other + ", this machine is " + here},
		{"qemu on a GPU", other, nil, []string{"GPU_CHECK_QEMU=1"}, "this bundle is for " + other + ", this machine is " + here},
		{"none", "", []string{"--simulated"}, nil, "this bundle records no architecture (no arch file beside run.sh), this machine is " + here},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundle(t)
			p := filepath.Join(dir, "arch")
			var err error
			if tc.arch == "" {
				err = os.Remove(p)
			} else {
				err = os.WriteFile(p, []byte(tc.arch+"\n"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", append([]string{filepath.Join(dir, "run.sh")}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			b, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 3 || !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), "hint:") {
				t.Errorf("run.sh %v with arch %q: %v, want exit 3 and %q\n%s", tc.args, tc.arch, err, tc.want, b)
			}
			if _, err := os.Stat(filepath.Join(dir, "gpuattest-ran")); err == nil {
				t.Errorf("run.sh %v with arch %q ran gpuattest before refusing", tc.args, tc.arch)
			}
		})
	}
}
