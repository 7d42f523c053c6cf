package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// TestRebuildSandboxed: a cuda-build-only pipeline whose host compiler
// is a script of the repository (flags: [-ccbin, ./cc.sh]) that writes a
// file outside the rebuild directory. rebuild runs it in the sandbox by
// default: the build still matches, and the file is not written.
// --unsandboxed says loudly what it gives up, and the file is written.
func TestRebuildSandboxed(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	testenv.RequireTool(t, "nvcc")
	testenv.RequireTool(t, "bwrap")
	testenv.RequireTool(t, "g++")
	outside := t.TempDir()
	marker := filepath.Join(outside, "pwned")
	src := t.TempDir()
	files := map[string]string{
		"k.cu":       "extern \"C\" __global__ void scale(float* x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }\n",
		"p.yaml":     "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: ccbin\ntargets: [sm_80]\nsteps:\n  - id: kernels\n    kind: cuda-build\n    sources: [k.cu]\n    flags: [-ccbin, ./cc.sh]\n",
		"cc.sh":      "#!/bin/sh\necho \"ran as $(id -un)\" >> " + marker + " 2>/dev/null\nexec g++ \"$@\"\n",
		".gitignore": "build/\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitCmd(t, src, "init", "-q")
	gitCmd(t, src, "add", "-A")
	gitCmd(t, src, "commit", "-q", "-m", "ccbin")
	keys, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The maintainer's own run trusts its source: the script runs.
	runDir := filepath.Join(t.TempDir(), "run")
	if code, out, errOut := cli(t, "run", filepath.Join(src, "p.yaml"), "--out", runDir, "--key", keys.Private, "-q", "--no-cache"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the run did not use ./cc.sh (no %s): the test proves nothing", marker)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	bundles := filepath.Join(runDir, "attestations.intoto.jsonl")
	code, out, errOut := cli(t, "rebuild", "--bundle", bundles, "--key", keys.Public, "--source", src, "--out", filepath.Join(t.TempDir(), "rb"))
	if code != 0 || !strings.Contains(out, "Rebuilt OK") {
		t.Fatalf("sandboxed rebuild: exit %d\n%s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the sandboxed rebuild let ./cc.sh write %s outside the rebuild directory: %q", marker, b)
	}
	code, out, errOut = cli(t, "rebuild", "--bundle", bundles, "--key", keys.Public, "--source", src, "--out", filepath.Join(t.TempDir(), "rb2"), "--unsandboxed")
	if code != 0 || !strings.Contains(errOut, "WARNING: --unsandboxed") || !strings.Contains(errOut, "network") {
		t.Fatalf("rebuild --unsandboxed: exit %d, want 0 and the warning\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("rebuild --unsandboxed did not run ./cc.sh on the host (no %s)", marker)
	}
}
