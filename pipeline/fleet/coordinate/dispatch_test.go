package coordinate_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines"
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

// TestPrepare stages a work tree and a build's outputs and checks the
// signed dispatch: subjects, staged digests, one 0600 key per job whose
// public half the dispatch names, nonces all different.
func TestPrepare(t *testing.T) {
	dir := t.TempDir()
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
	spec, err := fleet.Parse("fleet.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: slurm\nsharedDir: "+filepath.Join(dir, "shared")+
		"\nclasses:\n  - name: h100\n    gres: gpu:h100:8\n    constraint: sm_90\n    nodes: 2\n    targets: [sm_90]\n"))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline.Pipeline{Name: "p", Targets: []string{"sm_80", "sm_90"}, Path: filepath.Join(root, "p.yaml"), Dir: root, Root: root, Digest: "sha256:" + strings.Repeat("0", 64),
		Steps: []pipeline.Step{{ID: "build"}, {ID: "check", GPU: true, Needs: []string{"build"}}}}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prep, err := coordinate.Prepare(t.Context(), coordinate.Stage{Pipeline: p, BuildDir: buildDir, Fleet: spec, Binary: self, Signer: signer, ReleaseDir: filepath.Join(dir, "release")})
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
		d.Jobs[0].ComputeCapability != "9.0" || d.Jobs[0].GPUModel != "h100" || d.Jobs[0].GPUs != 8 {
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
