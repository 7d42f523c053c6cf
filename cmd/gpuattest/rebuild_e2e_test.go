package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
