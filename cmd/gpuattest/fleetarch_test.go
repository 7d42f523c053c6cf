//go:build unix

package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/slurmtest"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// arm64Fleet is fleetFile with a third class on arm64 nodes.
const arm64Fleet = fleetFile + `  - name: gh200
    gres: gpu:h100:1
    constraint: sm_90
    arch: arm64
    targets: [sm_90]
    timeLimit: 5m
`

// buildArm64 builds this gpuattest for linux/arm64 without cgo (the Go
// build cache keeps the compiled packages between runs) and returns it.
func buildArm64(t *testing.T, dir string) string {
	t.Helper()
	goTool := testenv.RequireTool(t, "go")
	out := filepath.Join(dir, "gpuattest-linux-arm64")
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building gpuattest for linux/arm64: %v\n%s", err, b)
	}
	return out
}

// TestFleetArm64Class runs a fleet with an arm64 class on the test
// cluster, whose node carries the arm64 feature and runs arm64
// executables under qemu-aarch64 (binfmt_misc): the dispatch stages the
// arm64 gpuattest for that class beside this one and pins its digest,
// sbatch places the gh200 job by the arm64 feature, and its job script
// runs the arm64 gpuattest. That one is built here without cgo (this
// host has no aarch64 C library to run make release's under qemu), so it
// has no NVML and refuses to run the GPU step: the gh200 job leaves no
// bundle, and says which gpuattest it was. The amd64 classes' node
// statements say amd64. (attest/dispatch's tests check an arm64 node
// statement against its class, and fail one of the wrong arch.)
func TestFleetArm64Class(t *testing.T) {
	if _, err := os.Stat("/proc/sys/fs/binfmt_misc/qemu-aarch64"); err != nil {
		testenv.Missing(t, "no qemu-aarch64 binfmt_misc handler to run arm64 executables (Debian's qemu-user-static)")
	}
	// Built before the setup moves HOME, and with it the Go build cache.
	bin := buildArm64(t, t.TempDir())
	dir := fleetSetupNode(t, &slurmtest.Config{Features: []string{"sm_80", "sm_90", "arm64"}})
	write(t, filepath.Join(dir, "fleet.yaml"), strings.ReplaceAll(arm64Fleet, "%SHARED%", filepath.Join(dir, "shared")))
	code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "--timeout", "4m",
		"--node-binary", "linux/arm64="+bin)
	if code != 1 || !strings.Contains(out, "missing: job gh200-0 (slurm ") || strings.Contains(out, "job a100-0 (slurm") || strings.Contains(out, "job h100-0 (slurm") {
		t.Fatalf("run --fleet: exit %d, want 1 with job gh200-0 missing alone\n%s", code, out)
	}
	d, _ := filepath.Glob(filepath.Join(dir, "shared", "*"))
	if len(d) != 1 {
		t.Fatalf("dispatch directories %v, want one", d)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(d[0], "bin", "gpuattest-linux-arm64")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("bin/gpuattest-linux-arm64 is not the arm64 gpuattest given (%v)", err)
	}
	if log := jobLog(t, d[0], "gh200"); !strings.Contains(log, "gpuattest was built for linux/arm64 without cgo") {
		t.Errorf("gh200-0 did not run the arm64 gpuattest; its log:\n%s", log)
	}
	file, err := os.ReadFile(filepath.Join(dir, "run", "dispatch.intoto.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sign.UnverifiedStatement(bytes.TrimSpace(file))
	if err != nil {
		t.Fatal(err)
	}
	disp, err := dispatch.Decode(st)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want)
	if !slices.Contains(disp.Staged, dispatch.File{Path: "bin/gpuattest-linux-arm64", SHA256: hex.EncodeToString(sum[:]), Mode: 0o755}) {
		t.Errorf("the dispatch does not pin bin/gpuattest-linux-arm64 at sha256 %x: %+v", sum, disp.Staged)
	}
	for _, j := range disp.Jobs {
		if want := map[string]string{"gh200": "arm64"}[j.Class]; j.Arch != cmp.Or(want, "amd64") {
			t.Errorf("job %s: arch %q in the dispatch", j.Name, j.Arch)
		}
	}
	code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated", "-o", "json")
	if code == 0 {
		t.Errorf("fleet verify passed with gh200-0 missing:\n%s", out)
	}
	for _, job := range []string{"a100-0", "h100-0"} {
		if !regexp.MustCompile(`"job": "` + job + `",[^}]*"verdict": "passed",[^}]*"arch": "amd64"`).MatchString(out) {
			t.Errorf("verify does not say job %s passed on a node that ran amd64:\n%s", job, out)
		}
	}
}
