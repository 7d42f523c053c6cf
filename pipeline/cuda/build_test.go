package cuda

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

var kernelSources = []string{"vector_add.cu", "reduce_sum.cu", "sgemm.cu", "softmax.cu"}

// copyKernels copies the reference kernels into a fresh work dir.
func copyKernels(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range kernelSources {
		b, err := os.ReadFile(filepath.Join("..", "..", "kernels", k))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, k), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func requireCUDA(t *testing.T) {
	t.Helper()
	testenv.RequireTool(t, "nvcc")
	testenv.RequireTool(t, "cuobjdump")
}

func testContext(t *testing.T, p *pipeline.Pipeline, work string, env []string) (*step.Context, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	stepDir := filepath.Join(t.TempDir(), "steps", p.Steps[0].ID)
	if err := os.MkdirAll(stepDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if env == nil {
		env = os.Environ()
	}
	return &step.Context{
		Pipeline: p, Step: &p.Steps[0], Runner: &runner.Host{}, WorkDir: work, StepDir: stepDir,
		Env: env, Stdout: &stdout, Stderr: &stderr, Logger: slog.New(slog.DiscardHandler),
	}, &stdout, &stderr
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestBuildKernels compiles kernels/ for sm_80 + sm_90 with real nvcc,
// checks what cuobjdump finds in each fatbin and that a second build in
// another directory is byte-identical. NVCC_APPEND_FLAGS tries to sneak
// in sm_86: it must be recorded, cleared and absent from the fatbins.
func TestBuildKernels(t *testing.T) {
	requireCUDA(t)
	work := copyKernels(t)
	p := &pipeline.Pipeline{Name: "k", Targets: []string{"sm_80", "sm_90"}, Steps: []pipeline.Step{{
		ID: "kernels", Kind: "cuda-build", Sources: kernelSources, Reproducible: "check",
	}}}
	sneak := "-gencode arch=compute_86,code=sm_86"
	sc, stdout, stderr := testContext(t, p, work, append(os.Environ(), "NVCC_APPEND_FLAGS="+sneak))
	out, err := (&Build{}).Execute(timeout(t, 5*time.Minute), sc)
	if err != nil {
		t.Fatalf("Execute: %v\nstderr:\n%s", err, stderr)
	}
	if out.Status != step.Passed {
		t.Fatalf("status %s: %s\nstderr:\n%s", out.Status, out.Reason, stderr)
	}
	det := out.Details.(*BuildDetails)
	if diff := cmp.Diff(map[string]string{"NVCC_APPEND_FLAGS": sneak}, det.ClearedEnv); diff != "" {
		t.Errorf("cleared env (-want +got):\n%s", diff)
	}
	if len(det.Commands) != 4 || !strings.Contains(stdout.String(), "$ nvcc -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 -o build/sgemm.fatbin sgemm.cu") {
		t.Errorf("commands not recorded as expected: %d records, stdout:\n%s", len(det.Commands), stdout)
	}
	if len(out.Artifacts) != 4 {
		t.Fatalf("artifacts = %+v, want 4", out.Artifacts)
	}
	for i, a := range det.Artifacts {
		name := strings.TrimSuffix(kernelSources[i], ".cu")
		if a.Path != "build/"+name+".fatbin" {
			t.Errorf("artifact %d path = %q", i, a.Path)
		}
		if diff := cmp.Diff([]string{"sm_80", "sm_90"}, a.SASS); diff != "" {
			t.Errorf("%s SASS (-want +got):\n%s", a.Path, diff)
		}
		if diff := cmp.Diff([]string{"compute_90"}, a.PTX); diff != "" {
			t.Errorf("%s PTX (-want +got):\n%s", a.Path, diff)
		}
		if len(a.Cubins) != 2 || a.CubinDigests()["sm_80"] == "" || a.CubinDigests()["sm_90"] == "" {
			t.Errorf("%s cubins = %+v", a.Path, a.Cubins)
		}
		sha, _, err := digest.File(filepath.Join(work, a.Path))
		if err != nil || sha != a.SHA256 || out.Artifacts[i].SHA256 != sha || out.Artifacts[i].Kind != "fatbin" {
			t.Errorf("%s digest %s, artifact %+v, file %s (%v)", a.Path, a.SHA256, out.Artifacts[i], sha, err)
		}
	}
	rep := det.Reproducibility
	if rep == nil || !rep.Reproducible || len(rep.Identical) != 4 || len(rep.Differing) != 0 {
		t.Fatalf("reproducibility = %+v, want 4 identical fatbins", rep)
	}
	if rep.FirstDir == rep.SecondDir {
		t.Errorf("both builds ran in %s", rep.FirstDir)
	}
	b, err := os.ReadFile(filepath.Join(sc.StepDir, "repro.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk ReproReport
	if err := json.Unmarshal(b, &onDisk); err != nil || !onDisk.Reproducible {
		t.Errorf("repro.json = %s (%v)", b, err)
	}
	if ents, _ := os.ReadDir(sc.StepDir); len(ents) != 1 {
		t.Errorf("step dir holds %d entries, want only repro.json (the second build is removed)", len(ents))
	}
}

// TestBuildRefusesSneakedArch: a build pinned to sm_80+sm_90 whose flags
// add sm_86 fails before nvcc runs, naming the flag and the fix.
func TestBuildRefusesSneakedArch(t *testing.T) {
	t.Parallel()
	work := copyKernels(t)
	p := &pipeline.Pipeline{Name: "k", Targets: []string{"sm_80", "sm_90"}, Steps: []pipeline.Step{
		{ID: "other", Kind: "exec"},
		{ID: "kernels", Kind: "cuda-build", Sources: []string{"vector_add.cu"}, Flags: []string{"-O3", "-gencode=arch=compute_86,code=sm_86"}},
	}}
	p.Steps = p.Steps[1:] // the index in field paths follows the pipeline
	p.Steps = append([]pipeline.Step{{ID: "other", Kind: "exec"}}, p.Steps...)
	sc, stdout, _ := testContext(t, p, work, nil)
	sc.Step = &p.Steps[1]
	out, err := (&Build{}).Execute(timeout(t, time.Minute), sc)
	if err != nil {
		t.Fatal(err)
	}
	want := `steps[1].flags[1]: "-gencode=arch=compute_86,code=sm_86" adds architecture sm_86, which is not a pinned target (targets: [sm_80, sm_90])`
	if out.Status != step.Failed || out.Reason != want {
		t.Errorf("outcome %s %q, want failed %q", out.Status, out.Reason, want)
	}
	if stdout.Len() != 0 {
		t.Errorf("nvcc ran: %s", stdout)
	}
}

// TestArchCheckCatchesExtraSASS builds a fatbin that really holds sm_86
// (bypassing the executor) and checks that inspection names the extra arch.
func TestArchCheckCatchesExtraSASS(t *testing.T) {
	requireCUDA(t)
	work := copyKernels(t)
	cmd := exec.CommandContext(timeout(t, 2*time.Minute), "nvcc", "-fatbin",
		"-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_86,code=sm_86", "-gencode", "arch=compute_90,code=sm_90",
		"-o", "v.fatbin", "vector_add.cu")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nvcc: %v\n%s", err, out)
	}
	in, err := Inspect(timeout(t, time.Minute), &runner.Host{}, filepath.Join(work, "v.fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	in.Path = "v.fatbin"
	targets, _ := pipeline.ParseTargets([]string{"sm_80", "sm_90"})
	got := checkArchs(in, pipeline.OutputFatbin, targets, true, "")
	want := "v.fatbin: SASS architectures [sm_80 sm_86 sm_90] do not match the expected [sm_80 sm_90]: extra sm_86; PTX architectures [] do not match the expected [compute_90]: missing compute_90 (pinned targets: [sm_80 sm_90])"
	if got != want {
		t.Errorf("checkArchs =\n%q\nwant\n%q", got, want)
	}
}

// TestReproExecutableTmpxft builds a host executable with nvcc twice, in
// two directories, and checks that the comparison reports what differs on
// this toolkit: the embedded tmpxft_<pid> file name, and in which section.
func TestReproExecutableTmpxft(t *testing.T) {
	requireCUDA(t)
	src := "#include <cstdio>\n__global__ void k(int* x) { *x = 1; }\nint main() { std::printf(\"hi\\n\"); return 0; }\n"
	root := t.TempDir()
	var dirs []string
	for _, d := range []string{"first", "second-build"} {
		dir := filepath.Join(root, d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.cu"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"nvcc", "-gencode", "arch=compute_80,code=sm_80", "-o", "app", "main.cu"},
			{"nvcc", "-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-o", "main.fatbin", "main.cu"},
		} {
			cmd := exec.CommandContext(timeout(t, 2*time.Minute), args[0], args[1:]...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
		}
		dirs = append(dirs, dir)
	}
	rep, err := CompareBuilds(dirs[0], dirs[1], []string{"main.fatbin", "app"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reproducible || len(rep.Identical) != 1 || rep.Identical[0] != "main.fatbin" || len(rep.Differing) != 1 {
		t.Fatalf("report = identical %v, differing %d; want the fatbin identical and the executable differing", rep.Identical, len(rep.Differing))
	}
	d := rep.Differing[0]
	if d.Path != "app" || d.Identical || d.FirstDifference < 0 {
		t.Fatalf("diff = %+v", d)
	}
	if len(d.Sections) == 0 {
		t.Fatalf("no differing ELF section reported:\n%s", d.Summary())
	}
	for _, s := range d.Sections {
		if s.Change != "differs" {
			t.Errorf("section %s: %s, want only content differences", s.Name, s.Change)
		}
	}
	hasTmpxft := func(ss []string) bool {
		for _, s := range ss {
			if strings.Contains(s, "tmpxft_") {
				return true
			}
		}
		return false
	}
	if !hasTmpxft(d.OnlyInFirst) || !hasTmpxft(d.OnlyInSecond) {
		t.Errorf("tmpxft_ strings not reported:\n%s", d.Summary())
	}
	t.Logf("executable difference:\n%s", d.Summary())
}

func TestFingerprint(t *testing.T) {
	requireCUDA(t)
	tc, err := Fingerprint(timeout(t, 2*time.Minute), &runner.Host{})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(tc.NVCC) || len(tc.NVCCSHA256) != 64 || !strings.Contains(tc.NVCCVersion, "Cuda compilation tools") || tc.Release == "" {
		t.Errorf("nvcc facts incomplete: %+v", tc)
	}
	if tc.NVCCBinary != "" && len(tc.NVCCBinarySHA256) != 64 {
		t.Errorf("nvcc binary %s has no digest", tc.NVCCBinary)
	}
	if tc.HostCompiler == "" || tc.HostCompilerVersion == "" {
		t.Errorf("host compiler not found: %+v", tc)
	}
	var names []string
	for _, tf := range tc.Tools {
		names = append(names, tf.Name)
		if !filepath.IsAbs(tf.Path) || len(tf.SHA256) != 64 {
			t.Errorf("tool %s: path %q sha256 %q, want an absolute path and a digest", tf.Name, tf.Path, tf.SHA256)
		}
	}
	if strings.Join(names, ",") != strings.Join(DrivenTools, ",") {
		t.Errorf("tools %v, want %v", names, DrivenTools)
	}
	t.Logf("%+v", tc)
}

// layeredEnvRunner runs processes on the host the way container runners
// layer environments: the image's own variables first, the command's on
// top. It stands in for an image whose ENV sets NVCC_APPEND_FLAGS.
type layeredEnvRunner struct {
	runner.Host
	imageEnv []string
}

func (l *layeredEnvRunner) Run(ctx context.Context, c *runner.Command) (*runner.Result, error) {
	cc := *c
	cc.Image = image.Pinned{}
	cc.Env = append(append([]string(nil), l.imageEnv...), c.Env...)
	return l.Host.Run(ctx, &cc)
}

// TestImageEnvCannotAddArchs: an image whose ENV sets NVCC_APPEND_FLAGS
// is recorded, and the empty override keeps its flags out of the build.
func TestImageEnvCannotAddArchs(t *testing.T) {
	requireCUDA(t)
	work := copyKernels(t)
	p := &pipeline.Pipeline{Name: "k", Targets: []string{"sm_80", "sm_90"}, Steps: []pipeline.Step{{
		ID: "kernels", Kind: "cuda-build", Sources: []string{"vector_add.cu"},
	}}}
	sneak := "-gencode arch=compute_86,code=sm_86"
	sc, _, stderr := testContext(t, p, work, nil)
	sc.Runner = &layeredEnvRunner{imageEnv: []string{"NVCC_APPEND_FLAGS=" + sneak}}
	pinned, err := image.ParsePinned("example.invalid/cuda@sha256:" + strings.Repeat("0", 64))
	if err != nil {
		t.Fatal(err)
	}
	sc.Image = pinned
	out, err := (&Build{}).Execute(timeout(t, 2*time.Minute), sc)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	det := out.Details.(*BuildDetails)
	if out.Status != step.Passed || det.ClearedEnv["NVCC_APPEND_FLAGS"] != sneak {
		t.Fatalf("status %s %q, cleared env %v", out.Status, out.Reason, det.ClearedEnv)
	}
	if diff := cmp.Diff([]string{"sm_80", "sm_90"}, det.Artifacts[0].SASS); diff != "" {
		t.Errorf("SASS (-want +got):\n%s", diff)
	}
}
