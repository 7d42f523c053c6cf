package coordinate_test

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

func TestSplit(t *testing.T) {
	p := &pipeline.Pipeline{Name: "p", Steps: []pipeline.Step{
		{ID: "build"},
		{ID: "harness", Needs: []string{"build"}},
		{ID: "bench", GPU: true, Needs: []string{"build", "harness"}},
		{ID: "summary", Needs: []string{"bench"}},
		{ID: "lint"},
	}}
	build, nodes := coordinate.Split(p)
	ids := func(q *pipeline.Pipeline) (out []string) {
		for _, s := range q.Steps {
			out = append(out, s.ID+"<"+strings.Join(s.Needs, ","))
		}
		return out
	}
	if got, want := ids(build), []string{"build<", "harness<build", "lint<"}; !slices.Equal(got, want) {
		t.Errorf("build part %v, want %v", got, want)
	}
	// A step after a GPU step runs on the node; needs on the build part go.
	if got, want := ids(nodes), []string{"bench<", "summary<bench"}; !slices.Equal(got, want) {
		t.Errorf("node part %v, want %v", got, want)
	}
	if len(p.Steps[2].Needs) != 2 {
		t.Errorf("Split changed the pipeline's own steps: %v", p.Steps[2].Needs)
	}
}

// stageFixture is a work tree, a passed build of it and the owner's
// signer: prepare stages them for a Slurm fleet of classes (YAML list
// items) in DIR/shared, with the node binaries by platform.
func stageFixture(t *testing.T) (dir string, prepare func(classes string, binaries map[string]string) (*coordinate.Prepared, error)) {
	t.Helper()
	dir = t.TempDir()
	root := filepath.Join(dir, "proj")
	buildDir := filepath.Join(dir, "build")
	for _, d := range []string{filepath.Join(root, "scripts"), filepath.Join(root, ".git"), filepath.Join(buildDir, "steps", "build", "outputs", "out")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(root, "p.yaml"):                                    "pipeline",
		filepath.Join(root, "scripts", "run.sh"):                         "#!/bin/sh\n",
		filepath.Join(root, ".git", "HEAD"):                              "ref",
		filepath.Join(buildDir, "steps", "build", "outputs", "out", "k"): "kernel",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := engine.Record{Schema: engine.RecordSchema, State: runtypes.Passed, Steps: []*engine.StepRecord{{ID: "build", State: runtypes.Passed,
		Outputs: []step.File{{Path: "out/k", SHA256: "6923dd1bc0460082c5d55a831908c24a282860b7f1cd6c2b79cf1bc8857c639c", Size: 6, Mode: 0o644}}}}}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(buildDir, "run.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	signer := fleettest.OwnerSigner(t)
	p := &pipeline.Pipeline{Name: "p", Targets: []string{"sm_80", "sm_90"}, Path: filepath.Join(root, "p.yaml"), Dir: root, Root: root, Digest: "sha256:" + strings.Repeat("0", 64),
		Steps: []pipeline.Step{{ID: "build"}, {ID: "check", GPU: true, Needs: []string{"build"}}}}
	return dir, func(classes string, binaries map[string]string) (*coordinate.Prepared, error) {
		spec, err := fleet.Parse("fleet.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: slurm\nsharedDir: "+filepath.Join(dir, "shared")+"\nclasses:\n"+classes))
		if err != nil {
			t.Fatal(err)
		}
		return coordinate.Prepare(t.Context(), coordinate.Stage{Pipeline: p, BuildDir: buildDir, Fleet: spec, Binaries: binaries, Signer: signer, ReleaseDir: filepath.Join(dir, "release")})
	}
}

// TestPrepare stages a work tree and a build's outputs and checks the
// signed dispatch: subjects, staged digests, one 0600 key per job whose
// public half the dispatch names, nonces all different.
func TestPrepare(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, prepare := stageFixture(t)
	prep, err := prepare("  - name: h100\n    gres: gpu:h100:8\n    constraint: sm_90\n    nodes: 2\n    targets: [sm_90]\n", map[string]string{"linux/amd64": self})
	if err != nil {
		t.Fatal(err)
	}
	d := prep.Dispatch
	if len(prep.Subjects) != 2 || prep.Subjects[0].Name != "out/k" || prep.Subjects[1].Name != oci.ManifestSubjectName || d.Pipeline.Path != "p.yaml" {
		t.Errorf("subjects %+v, pipeline path %q; want out/k, the release manifest and p.yaml", prep.Subjects, d.Pipeline.Path)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "release", "out", "k")); err != nil || string(b) != "kernel" {
		t.Errorf("the released file in ReleaseDir: %q, %v", b, err)
	}
	staged := map[string]string{}
	for _, f := range d.Staged {
		staged[f.Path] = f.SHA256
	}
	for _, want := range []string{"work/p.yaml", "work/scripts/run.sh", "work/out/k", "bin/gpuattest"} {
		if staged[want] == "" {
			t.Errorf("%s not staged; staged: %v", want, staged)
		}
	}
	if _, ok := staged["work/.git/HEAD"]; ok {
		t.Errorf(".git was staged")
	}
	if len(d.Jobs) != 2 || d.Jobs[0].Name != "h100-0" || d.Jobs[1].Name != "h100-1" || d.Jobs[0].Nonce == d.Jobs[1].Nonce || !d.Jobs[0].Distinct ||
		d.Jobs[0].ComputeCapability != "9.0" || d.Jobs[0].GPUModel != "h100" || d.Jobs[0].GPUs != 8 || d.Jobs[0].Arch != "amd64" {
		t.Errorf("jobs %+v", d.Jobs)
	}
	for _, j := range d.Jobs {
		key := coordinate.KeyPath(prep.Dir, j.Name)
		if _, err := os.Stat(filepath.Join(prep.Dir, "jobs", j.Name, "job.key")); err == nil {
			t.Errorf("job %s: a key staged in the job's directory, beside its work tree", j.Name)
		}
		fi, err := os.Stat(key)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("job key %s: %v, mode %v; want 0600", key, err, fi.Mode())
		}
		kp, err := sign.LoadPrivateKey(key, nil)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := sign.ParsePublicKey("dispatch", []byte(j.PublicKey))
		if err != nil || !pub.(*ecdsa.PublicKey).Equal(kp.GetPublicKey()) {
			t.Errorf("job %s: the dispatch's public key is not the staged key's (%v)", j.Name, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(prep.Dir, coordinate.DispatchFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sign.UnverifiedStatement([]byte(strings.TrimSpace(string(data))))
	if err != nil {
		t.Fatal(err)
	}
	if digest, _ := dispatch.Digest(st); digest != prep.Digest || st.PredicateType != dispatch.PredicateType {
		t.Errorf("the staged dispatch is %s of type %s, want %s", digest, st.PredicateType, prep.Digest)
	}
}

// buildFor builds an executable for linux/arch (CGO_ENABLED=0; the Go
// build cache keeps the compiled package between runs) and returns its
// path.
func buildFor(t *testing.T, arch string) string {
	t.Helper()
	goTool := testenv.RequireTool(t, "go")
	out := filepath.Join(t.TempDir(), "gpuattest-linux-"+arch)
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", out, "./testdata/nodestub")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building for linux/%s: %v\n%s", arch, err, b)
	}
	return out
}

// arm64Classes are two classes, h100 (amd64, the default) and gh200
// (arm64).
const arm64Classes = "  - {name: h100, gres: gpu:h100:8, targets: [sm_90]}\n" +
	"  - {name: gh200, gres: gpu:gh200:1, arch: arm64, constraint: sm_90, targets: [sm_90]}\n"

// arm64Fixture is a dispatch of arm64Classes prepared with a node binary
// for each machine (amd, arm), its prepare function, and the digests it
// pinned by staged path.
type arm64Fixture struct {
	amd, arm string
	prepare  func(classes string, binaries map[string]string) (*coordinate.Prepared, error)
	prep     *coordinate.Prepared
	staged   map[string]string
}

func prepareArm64(t *testing.T) arm64Fixture {
	t.Helper()
	f := arm64Fixture{amd: buildFor(t, "amd64"), arm: buildFor(t, "arm64"), staged: map[string]string{}}
	_, f.prepare = stageFixture(t)
	var err error
	f.prep, err = f.prepare(arm64Classes, map[string]string{"linux/amd64": f.amd, "linux/arm64": f.arm})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.prep.Dispatch.Staged {
		f.staged[s.Path] = s.SHA256
	}
	return f
}

// TestPrepareArm64Class: a fleet with an arm64 class stages the arm64
// gpuattest for it beside the amd64 one, pins both digests in the
// dispatch, records each job's arch, and the job script runs the arm64
// one for that class alone. Without an arm64 binary, or with one of the
// other machine, staging fails naming the class and the flag.
func TestPrepareArm64Class(t *testing.T) {
	f := prepareArm64(t)
	amd, arm, prep, staged := f.amd, f.arm, f.prep, f.staged
	for path, src := range map[string]string{"bin/gpuattest": amd, "bin/gpuattest-linux-arm64": arm} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); staged[path] != hex.EncodeToString(sum[:]) {
			t.Errorf("%s staged as sha256 %q, want the digest of %s", path, staged[path], src)
		}
	}
	for _, j := range prep.Dispatch.Jobs {
		if want := map[string]string{"h100": "amd64", "gh200": "arm64"}[j.Class]; j.Arch != want {
			t.Errorf("job %s: arch %q, want %q", j.Name, j.Arch, want)
		}
	}
	script, err := os.ReadFile(filepath.Join(prep.Dir, coordinate.JobScript))
	if err != nil {
		t.Fatal(err)
	}
	wantCase := "\tgh200) bin=bin/gpuattest-linux-arm64 bin_sha256=" + staged["bin/gpuattest-linux-arm64"] + " ;;\n"
	if !strings.Contains(string(script), "\nbin=bin/gpuattest\nbin_sha256="+staged["bin/gpuattest"]+"\n") || !strings.Contains(string(script), wantCase) {
		t.Errorf("job script does not pick the amd64 binary by default and the arm64 one for gh200:\n%s", script)
	}
	for name, bins := range map[string]map[string]string{
		"missing":       {"linux/amd64": amd},
		"wrong machine": {"linux/amd64": amd, "linux/arm64": amd},
	} {
		_, err := f.prepare(arm64Classes, bins)
		if err == nil || !strings.Contains(err.Error(), "class gh200") || !strings.Contains(err.Error(), "--node-binary linux/arm64=") {
			t.Errorf("%s arm64 binary: %v, want an error naming class gh200 and --node-binary", name, err)
		}
	}
}

// TestJobScriptRefusesSwappedArm64Binary: a writer of the shared
// directory who swaps the staged arm64 gpuattest after the dispatch was
// signed (here for the amd64 one, which would run on this machine) gets
// nothing run: the job script of the arm64 class checks its private
// copy against the digest the dispatch pinned for that class and
// refuses, naming both digests, while the amd64 class's untouched binary
// still runs.
func TestJobScriptRefusesSwappedArm64Binary(t *testing.T) {
	sh := testenv.RequireTool(t, "sh")
	f := prepareArm64(t)
	amd, prep, pinned := f.amd, f.prep, f.staged
	script := filepath.Join(prep.Dir, coordinate.JobScript)
	if out, err := exec.CommandContext(t.Context(), sh, script, "h100").CombinedOutput(); err != nil {
		t.Fatalf("the job script of class h100, nothing swapped: %v\n%s", err, out)
	}
	swapped := filepath.Join(prep.Dir, "bin", "gpuattest-linux-arm64")
	b, err := os.ReadFile(amd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(swapped, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(swapped, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	out, err := exec.CommandContext(t.Context(), sh, script, "gh200").CombinedOutput()
	want := "refusing to run " + prep.Dir + "/bin/gpuattest-linux-arm64: it is sha256:" + hex.EncodeToString(sum[:]) +
		", the dispatch names sha256:" + pinned["bin/gpuattest-linux-arm64"]
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("the job script of class gh200 with its binary swapped: %v, want a refusal saying %q\n%s", err, want, out)
	}
}
