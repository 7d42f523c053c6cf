package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/cudaimage"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// gitCmd runs git in dir with a fixed identity and fails the test on an
// error.
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// cloneRepo clones the repository holding this test (its committed
// state) into a new directory.
func cloneRepo(t *testing.T) string {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Run(); err != nil {
		testenv.Missing(t, "the source is not a git checkout, so it cannot be cloned")
	}
	dir := filepath.Join(t.TempDir(), "clone")
	gitCmd(t, filepath.Dir(dir), "clone", "-q", repo, dir)
	return dir
}

// cosignVSA verifies a VSA bundle with cosign against artifact.
func cosignVSA(t *testing.T, pub, bundle, artifact string) {
	t.Helper()
	cosign := testenv.RequireGoTool(t, "cosign")
	out, err := tool(t, t.TempDir(), cosign, "verify-blob-attestation", "--new-bundle-format", "--key", pub, "--bundle", bundle,
		"--insecure-ignore-tlog", "--type", attest.VSAPredicateType, artifact)
	if err != nil || !strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign verify-blob-attestation of the VSA %s: %v\n%s", bundle, err, out)
	}
}

// TestRebuildQuickstart is the rebuild acceptance test: a signed
// quickstart run in one clone of this repository is rebuilt from a
// second clean clone at the same commit (every artifact matches, exit 0,
// and the signed VSA verifies with cosign), and a one-byte change to a
// .cu file in the second clone, uncommitted or committed, is refused
// before anything is built.
func TestRebuildQuickstart(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	testenv.RequireTool(t, "nvcc")
	testenv.RequireTool(t, "g++")
	first, second := cloneRepo(t), cloneRepo(t)
	keys, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if code, out, errOut := cli(t, "run", filepath.Join(first, "pipelines", "quickstart.yaml"), "--out", runDir, "--key", keys.Private, "-q", "--no-cache"); code != 0 {
		t.Fatalf("run quickstart: exit %d\n%s%s", code, out, errOut)
	}
	bundles := filepath.Join(runDir, "attestations.intoto.jsonl")
	vsa := filepath.Join(t.TempDir(), "vsa.json")
	code, out, errOut := cli(t, "rebuild", "--bundle", bundles, "--key", keys.Public, "--source", second,
		"--out", filepath.Join(t.TempDir(), "rb"), "--sign-key", keys.Private, "--vsa-out", vsa)
	// Five files are released: the four fatbins and the harness (an exec
	// step's output, rebuilt too), plus the release manifest.
	if code != 0 || !strings.Contains(out, "Rebuilt OK: 6 artifact(s) match the provenance") {
		t.Fatalf("rebuild from a clean clone: exit %d\n%s%s", code, out, errOut)
	}
	for _, k := range []string{"vector_add.fatbin", "reduce_sum.fatbin", "sgemm.fatbin", "softmax.fatbin", "gpuattest-harness"} {
		if !regexp.MustCompile(`(?m)^kernels/build/` + regexp.QuoteMeta(k) + ` +sha256:[0-9a-f]{12} +sha256:[0-9a-f]{12} +yes$`).MatchString(out) {
			t.Errorf("no matching row for %s:\n%s", k, out)
		}
	}
	artifact := filepath.Join(runDir, "steps", "kernels", "outputs", "build", "vector_add.fatbin")
	cosignVSA(t, keys.Public, vsa, artifact)

	// verify --vsa-out: a VSA of a successful verification.
	pol := filepath.Join(t.TempDir(), "steps.yaml")
	if err := os.WriteFile(pol, []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: steps passed\n    expr: predicate.steps.all(s, s.verdict in [\"passed\", \"cached\"])\n    message: no step failed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vsa2 := filepath.Join(t.TempDir(), "verify-vsa.json")
	if code, out, errOut := cli(t, "verify", "--bundle", bundles, "--key", keys.Public, "--policy", pol, "--sign-key", keys.Private, "--vsa-out", vsa2, artifact); code != 0 || !strings.Contains(out, "VSA ("+attest.VSAPredicateType+") signed") {
		t.Fatalf("verify --vsa-out: exit %d\n%s%s", code, out, errOut)
	}
	cosignVSA(t, keys.Public, vsa2, artifact)

	// A one-byte change to a .cu, uncommitted, then committed.
	cu := filepath.Join(second, "kernels", "vector_add.cu")
	b, err := os.ReadFile(cu)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cu, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, committed := range []bool{false, true} {
		if committed {
			gitCmd(t, second, "commit", "-q", "-am", "one byte more")
		}
		rb := filepath.Join(t.TempDir(), "refused")
		code, out, errOut := cli(t, "rebuild", "--bundle", bundles, "--key", keys.Public, "--source", second, "--out", rb)
		if code != exitFailed || !strings.Contains(errOut, "source does not match the provenance") {
			t.Errorf("rebuild with a changed .cu (committed %v): exit %d, want %d and the source refused\n%s%s", committed, code, exitFailed, out, errOut)
		}
		if _, err := os.Stat(rb); err == nil {
			t.Errorf("rebuild with a changed .cu (committed %v) made %s: something was built", committed, rb)
		}
	}
}

// TestRebuildNotDeterministic: a build step whose output embeds the time,
// signed with reproducible: off, rebuilds to other bytes: exit 13, the
// artifact named, and the embedded times shown as the difference. The
// pipeline sits in a subdirectory of the repository, which the
// provenance's pipeline path says.
func TestRebuildNotDeterministic(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	testenv.RequireTool(t, "nvcc")
	src := t.TempDir()
	files := map[string]string{
		"k/stamp.cu": "__device__ const char built_at[] = \"built at \" __DATE__ \" \" __TIME__;\n__global__ void stamp(char *out) { out[threadIdx.x] = built_at[threadIdx.x]; }\n",
		"k/p.yaml":   "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: stamped\ntargets: [sm_80]\nsteps:\n  - id: kernels\n    kind: cuda-build\n    sources: [stamp.cu]\n    reproducible: off\n",
		".gitignore": "build/\n",
	}
	if err := os.Mkdir(filepath.Join(src, "k"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, filepath.FromSlash(name)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCmd(t, src, "init", "-q")
	gitCmd(t, src, "add", "-A")
	gitCmd(t, src, "commit", "-q", "-m", "stamped kernel")
	clone := filepath.Join(t.TempDir(), "clone")
	gitCmd(t, filepath.Dir(clone), "clone", "-q", src, clone)
	keys, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if code, out, errOut := cli(t, "run", filepath.Join(src, "k", "p.yaml"), "--out", runDir, "--key", keys.Private, "-q", "--no-cache"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	vsa := filepath.Join(t.TempDir(), "vsa.json")
	code, out, errOut := cli(t, "rebuild", "--bundle", filepath.Join(runDir, "attestations.intoto.jsonl"), "--key", keys.Public, "--source", clone, "--out", filepath.Join(t.TempDir(), "rb"),
		"--sign-key", keys.Private, "--vsa-out", vsa)
	if code != exitDiffer {
		t.Fatalf("rebuild of a time-stamped build: exit %d, want %d\n%s%s", code, exitDiffer, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^build/stamp\.fatbin +sha256:[0-9a-f]{12} +sha256:[0-9a-f]{12} +NO$`).MatchString(out) ||
		!strings.Contains(out, "Rebuild DIFFERS") || !strings.Contains(out, `"built at `) || !strings.Contains(out, "rebuilt k/p.yaml at") {
		t.Fatalf("rebuild output does not name the differing artifact and the embedded time:\n%s", out)
	}
	// The VSA of a differing rebuild says FAILED and claims no level.
	vb, err := os.ReadFile(vsa)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sign.UnverifiedStatement(vb)
	if err != nil {
		t.Fatal(err)
	}
	var pred attest.VSA
	if err := json.Unmarshal(st.Predicate, &pred); err != nil || st.PredicateType != attest.VSAPredicateType || pred.VerificationResult != attest.VSAFailed || len(pred.VerifiedLevels) != 0 {
		t.Errorf("VSA of a differing rebuild: %v %s", err, st.Predicate)
	}
	// -o json, with the original artifact: the same verdict, every
	// artifact, and the original compared with the rebuilt file.
	orig := filepath.Join(runDir, "steps", "kernels", "outputs", "build", "stamp.fatbin")
	code, out, errOut = cli(t, "rebuild", "--bundle", filepath.Join(runDir, "attestations.intoto.jsonl"), "--key", keys.Public, "--source", clone, "--out", filepath.Join(t.TempDir(), "rb2"), "-o", "json", orig)
	var got struct {
		Rebuild struct {
			Match     bool
			Artifacts []struct {
				Name, Expected, Rebuilt string
				Match                   bool
			}
			Diff struct {
				Differing []struct {
					Path        string
					OnlyInFirst []string `json:"only_in_first"`
				}
			}
			DiffNote string `json:"diff_note"`
		}
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitDiffer || got.ExitCode != exitDiffer || got.Rebuild.Match {
		t.Fatalf("rebuild -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if len(got.Rebuild.Artifacts) != 2 || got.Rebuild.Artifacts[0].Name != "build/stamp.fatbin" || got.Rebuild.Artifacts[0].Match ||
		len(got.Rebuild.Diff.Differing) != 1 || got.Rebuild.Diff.Differing[0].Path != "build/stamp.fatbin" ||
		!strings.Contains(got.Rebuild.DiffNote, "originals given") || !strings.Contains(strings.Join(got.Rebuild.Diff.Differing[0].OnlyInFirst, "\n"), "built at ") {
		t.Errorf("rebuild -o json: %+v", got)
	}
}

// TestRebuildInImage: a build that ran under docker in the CUDA test
// image (served by a registry on 127.0.0.1, pinned by digest) records the
// image as a URI by digest and the toolchain inside it, and rebuilds in
// the same image to the same bytes.
func TestRebuildInImage(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	testenv.RequireTool(t, "nvcc")
	testenv.RequireDocker(t)
	_, img := cudaimage.Ensure(t)
	ref := cudaimage.Push(t, img, cudaimage.StartRegistry(t))
	src := t.TempDir()
	pipe := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: inimage\ntargets: [sm_80]\nimages:\n  cuda: " + ref +
		"\nsteps:\n  - id: kernels\n    kind: cuda-build\n    runner: docker\n    image: cuda\n    flags: [-ccbin, g++-11]\n    sources: [k.cu]\n"
	for name, body := range map[string]string{"p.yaml": pipe, "k.cu": cudaimage.KernelSource, ".gitignore": "build/\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCmd(t, src, "init", "-q")
	gitCmd(t, src, "add", "-A")
	gitCmd(t, src, "commit", "-q", "-m", "kernel in an image")
	clone := filepath.Join(t.TempDir(), "clone")
	gitCmd(t, filepath.Dir(clone), "clone", "-q", src, clone)
	keys, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if code, out, errOut := cli(t, "run", filepath.Join(src, "p.yaml"), "--out", runDir, "--key", keys.Private, "-q", "--no-cache"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	bundles := filepath.Join(runDir, "attestations.intoto.jsonl")
	code, out, errOut := cli(t, "rebuild", "--bundle", bundles, "--key", keys.Public, "--source", clone, "--out", filepath.Join(t.TempDir(), "rb"), "-o", "json")
	var got struct {
		Verify struct {
			Bundles []struct {
				PredicateType string `json:"predicate_type"`
			}
		}
		Rebuild struct {
			Match bool
			Notes []string
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || !got.Rebuild.Match || len(got.Rebuild.Notes) != 0 {
		t.Fatalf("rebuild in the image: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	prov := provenanceIn(t, bundles)
	step := prov.BuildDefinition.ExternalParameters.BuildSteps[0]
	if !strings.HasPrefix(step.Image, "oci://127.0.0.1:") || !strings.Contains(step.Image, "@sha256:") || step.Runner != "docker" {
		t.Errorf("build step image %q runner %q, want oci://REPO@sha256:... on docker", step.Image, step.Runner)
	}
	tools := map[string]bool{}
	for _, d := range prov.BuildDefinition.ResolvedDependencies {
		if d.Annotations["image"] == step.Image && len(d.Digest["sha256"]) == 64 {
			tools[d.Name] = true
		}
	}
	for _, name := range []string{"nvcc", "cicc", "ptxas", "fatbinary"} {
		if !tools[name] {
			t.Errorf("no %s digest from inside the image among the resolved dependencies", name)
		}
	}
}

// provenanceIn reads the SLSA provenance predicate out of a bundle file
// (unverified: the caller verified it).
func provenanceIn(t *testing.T, file string) *attest.Provenance {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		st, err := sign.UnverifiedStatement([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if st.PredicateType == attest.ProvenancePredicateType {
			var p attest.Provenance
			if err := json.Unmarshal(st.Predicate, &p); err != nil {
				t.Fatal(err)
			}
			return &p
		}
	}
	t.Fatalf("%s holds no provenance", file)
	return nil
}

// TestRebuildTwoProvenances: a bundle file holding two provenances signed
// by the same key is refused, naming both, before anything is built; with
// an ARTIFACT that only one of them names, that one is rebuilt and its
// VSA names its subjects alone, never the other provenance's (issue 21,
// item 1). The VSA names the source as the checkout's remote, not as the
// provenance claims it (item 6).
func TestRebuildTwoProvenances(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	testenv.RequireTool(t, "nvcc")
	src := t.TempDir()
	pipe := func(name, cu string) string {
		return "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: " + name + "\ntargets: [sm_80]\nsteps:\n  - id: kernels\n    kind: cuda-build\n    sources: [" + cu + "]\n    reproducible: off\n"
	}
	files := map[string]string{
		"a.cu":       "__global__ void a(float *x) { x[threadIdx.x] += 1.0f; }\n",
		"b.cu":       "__global__ void b(float *x) { x[threadIdx.x] *= 2.0f; }\n",
		"a.yaml":     pipe("a", "a.cu"),
		"b.yaml":     pipe("b", "b.cu"),
		".gitignore": "build/\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCmd(t, src, "init", "-q")
	gitCmd(t, src, "add", "-A")
	gitCmd(t, src, "commit", "-q", "-m", "two kernels")
	gitCmd(t, src, "remote", "add", "origin", "https://example.com/claimed/upstream.git")
	clone := filepath.Join(t.TempDir(), "clone")
	gitCmd(t, filepath.Dir(clone), "clone", "-q", src, clone)
	keys, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	var fatbins []string
	for _, name := range []string{"a", "b"} {
		runDir := filepath.Join(t.TempDir(), "run-"+name)
		if code, out, errOut := cli(t, "run", filepath.Join(src, name+".yaml"), "--out", runDir, "--key", keys.Private, "-q", "--no-cache"); code != 0 {
			t.Fatalf("run %s: exit %d\n%s%s", name, code, out, errOut)
		}
		b, err := os.ReadFile(filepath.Join(runDir, "attestations.intoto.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
		fatbins = append(fatbins, filepath.Join(runDir, "steps", "kernels", "outputs", "build", name+".fatbin"))
	}
	bundles := filepath.Join(t.TempDir(), "both.jsonl")
	if err := os.WriteFile(bundles, all, 0o644); err != nil {
		t.Fatal(err)
	}
	rb := filepath.Join(t.TempDir(), "refused")
	code, out, errOut := cli(t, "rebuild", "--bundle", bundles, "--key", keys.Public, "--source", clone, "--out", rb, "--sign-key", keys.Private)
	if code != exitFailed || !strings.Contains(errOut, "2 verified SLSA provenance statements") {
		t.Fatalf("rebuild of two provenances: exit %d, want %d and both named\n%s%s", code, exitFailed, out, errOut)
	}
	if _, err := os.Stat(rb); err == nil {
		t.Errorf("the refused rebuild made %s", rb)
	}

	vsa := filepath.Join(t.TempDir(), "vsa.json")
	code, out, errOut = cli(t, "rebuild", "--bundle", bundles, "--key", keys.Public, "--source", clone, "--out", filepath.Join(t.TempDir(), "rb"),
		"--sign-key", keys.Private, "--vsa-out", vsa, fatbins[0])
	if code != 0 || !strings.Contains(out, "Rebuilt OK") {
		t.Fatalf("rebuild of the provenance naming a.fatbin: exit %d\n%s%s", code, out, errOut)
	}
	vb, err := os.ReadFile(vsa)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sign.UnverifiedStatement(vb)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range st.Subject {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "build/a.fatbin,oci:release-manifest" {
		t.Errorf("VSA subjects = %s, want a's artifacts only", got)
	}
	var pred attest.VSA
	if err := json.Unmarshal(st.Predicate, &pred); err != nil || pred.VerificationResult != attest.VSAPassed || len(pred.InputAttestations) != 1 {
		t.Fatalf("VSA: %v %s", err, st.Predicate)
	}
	// The clone's origin is the local source directory, not the URL the
	// provenance recorded.
	if strings.Contains(pred.ResourceURI, "example.com") || !strings.HasPrefix(pred.ResourceURI, "git+file://") {
		t.Errorf("VSA resourceUri = %s, want the checkout's own remote", pred.ResourceURI)
	}
	cosignVSA(t, keys.Public, vsa, fatbins[0])
}
