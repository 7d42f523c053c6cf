package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// TestPublishQuickstart is the end-to-end publishing test: a signed
// quickstart run (real nvcc build, harness on the CPU backend when there
// is no GPU) is pushed to docker-registry (tag schema) and to the
// in-process registry (referrers API), verified from both, copied with
// pull --to oci-layout:DIR and verified from the copy with no registry
// running, and pulled from the copy into files identical to the run's.
func TestPublishQuickstart(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "nvcc")
	testenv.RequireTool(t, "g++")
	root := copyQuickstart(t)
	keys, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if code, out, errOut := cli(t, "run", filepath.Join(root, "pipelines", "quickstart.yaml"), "--out", runDir, "--key", keys.Private, "--root", root, "-q", "--no-cache"); code != 0 {
		t.Fatalf("run quickstart: exit %d\n%s%s", code, out, errOut)
	}
	docker := registrytest.StartDocker(t)
	layout := filepath.Join(t.TempDir(), "copy")
	for i, host := range []string{docker.Host, registrytest.StartInProcess(t, nil)} {
		ref := host + "/quickstart:v1"
		byDigest := push(t, runDir, ref)
		for _, r := range []string{ref, byDigest} {
			if code, out, errOut := cli(t, "verify", r, "--key", keys.Public, "--policy", "builtin:cpu-tier"); code != 0 || !strings.Contains(out, "Verified OK") {
				t.Fatalf("verify %s: exit %d\n%s%s", r, code, out, errOut)
			}
		}
		if i == 0 {
			if code, out, errOut := cli(t, "pull", ref, "--key", keys.Public, "--policy", "builtin:cpu-tier", "--to", "oci-layout:"+layout); code != 0 {
				t.Fatalf("pull --to: exit %d\n%s%s", code, out, errOut)
			}
		}
	}
	// Offline: the registries' address is gone from what is read.
	code, out, errOut := cli(t, "verify", "oci-layout:"+layout, "--key", keys.Public, "--policy", "builtin:cpu-tier", "-o", "json")
	if code != 0 || !strings.Contains(out, `"referrers": "OCI layout index"`) {
		t.Fatalf("verify oci-layout: exit %d\n%s%s", code, out, errOut)
	}
	cosign := testenv.RequireGoTool(t, "cosign")
	if out, err := tool(t, t.TempDir(), cosign, "verify-attestation", "--local-image", layout, "--new-bundle-format", "--key", keys.Public,
		"--insecure-ignore-tlog", "--type", attest.ValidationPredicateType); err != nil {
		t.Errorf("cosign verify-attestation --local-image: %v\n%s", err, out)
	}
	files := filepath.Join(t.TempDir(), "files")
	if code, out, errOut := cli(t, "pull", "oci-layout:"+layout, "--key", keys.Public, "--policy", "builtin:cpu-tier", "--out", files); code != 0 {
		t.Fatalf("pull from the layout: exit %d\n%s%s", code, out, errOut)
	}
	for _, k := range []string{"vector_add", "reduce_sum", "sgemm", "softmax"} {
		name := "kernels/build/" + k + ".fatbin"
		want, err := os.ReadFile(filepath.Join(runDir, "steps", "kernels", "outputs", "build", k+".fatbin"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(files, filepath.FromSlash(name))); err != nil || string(got) != string(want) {
			t.Errorf("pulled %s differs from the run's (%v)", name, err)
		}
	}
}

// copyQuickstart copies pipelines/quickstart.yaml and kernels/ (without
// build outputs) into a new root directory.
func copyQuickstart(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(filepath.Join(repo, "kernels"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		if d.IsDir() {
			if d.Name() == "build" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repo, "pipelines", "quickstart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "pipelines"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pipelines", "quickstart.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}
