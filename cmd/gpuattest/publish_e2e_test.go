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
// running, and pulled from the copy into files identical to the run's;
// then a benchmark runs the harness against the release's kernels
// (reference.release).
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
	var published string // the release in the in-process registry, by digest
	for i, host := range []string{docker.Host, registrytest.StartInProcess(t, nil)} {
		ref := host + "/quickstart:v1"
		byDigest := push(t, runDir, ref)
		published = byDigest
		for _, r := range []string{ref, byDigest} {
			if code, out, errOut := cli(t, "verify", r, "--key", keys.Public); code != 0 || !strings.Contains(out, "Verified OK") {
				t.Fatalf("verify %s: exit %d\n%s%s", r, code, out, errOut)
			}
		}
		if i == 0 {
			if code, out, errOut := cli(t, "pull", ref, "--key", keys.Public, "--to", "oci-layout:"+layout); code != 0 {
				t.Fatalf("pull --to: exit %d\n%s%s", code, out, errOut)
			}
		}
	}
	// Offline: the registries' address is gone from what is read.
	code, out, errOut := cli(t, "verify", "oci-layout:"+layout, "--key", keys.Public, "-o", "json")
	if code != 0 || !strings.Contains(out, `"referrers": "OCI layout index"`) {
		t.Fatalf("verify oci-layout: exit %d\n%s%s", code, out, errOut)
	}
	cosign := testenv.RequireGoTool(t, "cosign")
	if out, err := tool(t, t.TempDir(), cosign, "verify-attestation", "--local-image", layout, "--new-bundle-format", "--key", keys.Public,
		"--insecure-ignore-tlog", "--type", attest.ValidationPredicateType); err != nil {
		t.Errorf("cosign verify-attestation --local-image: %v\n%s", err, out)
	}
	files := filepath.Join(t.TempDir(), "files")
	if code, out, errOut := cli(t, "pull", "oci-layout:"+layout, "--key", keys.Public, "--out", files); code != 0 {
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
	benchAgainstRelease(t, root, published, keys.Public)
}

// benchAgainstRelease runs a benchmark of the quickstart's harness (built
// in root by the quickstart run) on the CPU backend against the kernels of
// the published release ref, verified with the public key pub.
func benchAgainstRelease(t *testing.T, root, ref, pub string) {
	t.Helper()
	data, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "keys"), 0o755)
	if err := os.WriteFile(filepath.Join(root, "keys", "release.pub"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	size := `--n 4096 --gemm 32 --rows 16 --cols 64`
	src := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: bench-release\nrunner: host\nworkdir: ..\nsteps:\n" +
		"  - id: bench\n    kind: benchmark\n    workdir: kernels\n" +
		"    run: build/gpuattest-harness --backend cpu --fatbin-dir build " + size + " --out build/cand.json\n    results: build/cand.json\n" +
		"    repeats: 5\n    rounds: 8\n    gate: {threshold: 50%}\n" +
		"    reference:\n      release: " + ref + "\n      key: ../keys/release.pub\n" +
		"      run: build/gpuattest-harness --backend cpu --fatbin-dir \"$GPUATTEST_REFERENCE_DIR/kernels/build\" " + size + " --out build/ref.json\n" +
		"      results: build/ref.json\n"
	p := filepath.Join(root, "pipelines", "bench-release.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "bench")
	if code, out, errOut := cli(t, "run", p, "--out", runDir, "--root", root, "-q"); code != 0 {
		t.Fatalf("run bench-release: exit %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(runDir, "steps", "bench", "benchmark.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, digest, _ := strings.Cut(ref, "@")
	if !strings.Contains(string(b), `"digest": "`+digest+`"`) && !strings.Contains(string(b), `"digest":"`+digest+`"`) {
		t.Errorf("benchmark.json does not record the release %s", digest)
	}
	for _, k := range []string{"vector_add", "sgemm"} {
		if _, err := os.Stat(filepath.Join(runDir, "steps", "bench", "reference-release", "kernels", "build", k+".fatbin")); err != nil {
			t.Errorf("the verified release's %s.fatbin: %v", k, err)
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
