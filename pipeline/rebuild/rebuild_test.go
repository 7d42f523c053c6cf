package rebuild

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

// provenance is a provenance statement with the given external
// parameters.
func provenance(t *testing.T, ext attest.ExternalParameters) *attest.Statement {
	t.Helper()
	raw, err := json.Marshal(attest.Provenance{BuildDefinition: attest.BuildDefinition{BuildType: attest.BuildType, ExternalParameters: ext}})
	if err != nil {
		t.Fatal(err)
	}
	return &attest.Statement{Type: attest.StatementType, PredicateType: attest.ProvenancePredicateType, Predicate: raw}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	build := []attest.BuildStep{{ID: "k", Kind: pipeline.KindCUDABuild}}
	pipe := attest.PipelineParam{Path: "pipelines/p.yaml"}
	tests := []struct {
		name, want string
		st         *attest.Statement
	}{
		{"not provenance", "predicate type", &attest.Statement{PredicateType: attest.ValidationPredicateType}},
		{"no source", "externalParameters.source: no source commit", provenance(t, attest.ExternalParameters{Pipeline: pipe, BuildSteps: build})},
		{"dirty", "source.dirty", provenance(t, attest.ExternalParameters{Source: &attest.Source{Commit: commit, Dirty: true}, Pipeline: pipe, BuildSteps: build})},
		{"pipeline outside", "pipeline.path", provenance(t, attest.ExternalParameters{Source: &attest.Source{Commit: commit}, Pipeline: attest.PipelineParam{Path: "../p.yaml"}, BuildSteps: build})},
		{"no build step", "no cuda-build step", provenance(t, attest.ExternalParameters{Source: &attest.Source{Commit: commit}, Pipeline: pipe, BuildSteps: []attest.BuildStep{{ID: "e", Kind: "exec"}}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.st)
			if !errors.Is(err, ErrNotRebuildable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want ErrNotRebuildable saying %q", err, tc.want)
			}
		})
	}
	if _, err := Decode(provenance(t, attest.ExternalParameters{Source: &attest.Source{Commit: commit}, Pipeline: pipe, BuildSteps: build})); err != nil {
		t.Fatalf("Decode of a rebuildable provenance: %v", err)
	}
}

func TestSelectSteps(t *testing.T) {
	t.Parallel()
	p := &pipeline.Pipeline{Steps: []pipeline.Step{
		{ID: "gen"},
		{ID: "unrelated"},
		{ID: "k", Kind: pipeline.KindCUDABuild, Needs: []string{"gen"}, Reproducible: "check"},
		{ID: "test", Kind: pipeline.KindTest, Needs: []string{"k"}},
	}}
	ids, err := selectSteps(p, []attest.BuildStep{{ID: "gen", Kind: "exec"}, {ID: "unrelated", Kind: "exec"}, {ID: "k", Kind: pipeline.KindCUDABuild}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "gen,k" || len(p.Steps) != 2 || p.Steps[1].Reproducible != "off" {
		t.Fatalf("selected %v (steps %+v), want gen,k with the check off", ids, p.Steps)
	}
	p = &pipeline.Pipeline{Steps: []pipeline.Step{{ID: "t", Kind: pipeline.KindTest}, {ID: "k", Kind: pipeline.KindCUDABuild, Needs: []string{"t"}}}}
	if _, err := selectSteps(p, []attest.BuildStep{{ID: "k", Kind: pipeline.KindCUDABuild}}); !errors.Is(err, ErrNotRebuildable) {
		t.Fatalf("a build step needing a test: %v, want ErrNotRebuildable", err)
	}
}

func TestCompareSteps(t *testing.T) {
	t.Parallel()
	rec := []attest.BuildStep{{ID: "k", Image: "oci://r/cuda@sha256:aa", Commands: [][]string{{"nvcc", "a.cu"}}}}
	if n, err := compareSteps(rec, rec); len(n) != 0 || err != nil {
		t.Fatalf("same steps: notes %v, %v", n, err)
	}
	got, err := compareSteps(rec, []attest.BuildStep{{ID: "k", Image: rec[0].Image, Commands: [][]string{{"nvcc", "b.cu"}}}})
	if len(got) != 1 || !strings.Contains(got[0], "other nvcc commands") || err != nil {
		t.Fatalf("other commands: notes %q, %v, want them named", got, err)
	}
	_, err = compareSteps(rec, []attest.BuildStep{{ID: "k", Image: "oci://r/cuda@sha256:bb", Commands: rec[0].Commands}})
	if !errors.Is(err, ErrImageMismatch) || !strings.Contains(err.Error(), "sha256:bb") {
		t.Fatalf("another image: %v, want ErrImageMismatch naming it", err)
	}
}

// CheckSource refuses a tree at another commit and a dirty tree, and
// accepts a clean checkout of the commit.
func TestCheckSource(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "git")
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "k.cu"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "c")
	head := git("rev-parse", "HEAD")
	prov := func(c string) *attest.Provenance {
		return &attest.Provenance{BuildDefinition: attest.BuildDefinition{ExternalParameters: attest.ExternalParameters{Source: &attest.Source{Commit: c}}}}
	}
	if _, err := CheckSource(t.Context(), prov(head), dir); err != nil {
		t.Fatalf("clean checkout of the commit: %v", err)
	}
	if _, err := CheckSource(t.Context(), prov(commit), dir); !errors.Is(err, ErrSourceMismatch) || !strings.Contains(err.Error(), commit) {
		t.Fatalf("other commit: %v, want ErrSourceMismatch naming %s", err, commit)
	}
	if err := os.WriteFile(filepath.Join(dir, "k.cu"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckSource(t.Context(), prov(head), dir); !errors.Is(err, ErrSourceMismatch) || !strings.Contains(err.Error(), "k.cu") {
		t.Fatalf("dirty tree: %v, want ErrSourceMismatch naming k.cu", err)
	}
}

// A host build is rebuilt only with the recorded nvcc, cicc, ptxas and
// fatbinary; a step in an image needs no host toolchain.
func TestCheckHostToolchain(t *testing.T) {
	t.Parallel()
	testenv.RequireTool(t, "nvcc")
	tc, err := cuda.Fingerprint(t.Context(), &runner.Host{})
	if err != nil {
		t.Fatal(err)
	}
	deps := []attest.ResourceDescriptor{{Name: "nvcc", Digest: map[string]string{"sha256": firstNonEmpty(tc.NVCCBinarySHA256, tc.NVCCSHA256)}}}
	for _, tf := range tc.Tools {
		deps = append(deps, attest.ResourceDescriptor{Name: tf.Name, Digest: map[string]string{"sha256": tf.SHA256}})
	}
	host := &pipeline.Pipeline{Steps: []pipeline.Step{{ID: "k", Kind: pipeline.KindCUDABuild}}}
	if err := checkHostToolchain(t.Context(), host, deps); err != nil {
		t.Fatalf("this host's own toolchain: %v", err)
	}
	bad := append([]attest.ResourceDescriptor(nil), deps...)
	bad[2] = attest.ResourceDescriptor{Name: bad[2].Name, Digest: map[string]string{"sha256": strings.Repeat("0", 64)}}
	if err := checkHostToolchain(t.Context(), host, bad); !errors.Is(err, ErrToolchainMismatch) || !strings.Contains(err.Error(), bad[2].Name+": sha256") {
		t.Fatalf("another %s: %v, want ErrToolchainMismatch naming it", bad[2].Name, err)
	}
	if err := checkHostToolchain(t.Context(), host, nil); !errors.Is(err, ErrToolchainMismatch) {
		t.Fatalf("no recorded toolchain: %v, want ErrToolchainMismatch", err)
	}
	// Digests recorded inside an image do not stand for the host's.
	inImage := append([]attest.ResourceDescriptor(nil), bad...)
	for i := range inImage {
		inImage[i].Annotations = map[string]string{"image": "oci://r/cuda@sha256:" + strings.Repeat("1", 64)}
	}
	if err := checkHostToolchain(t.Context(), host, inImage); !errors.Is(err, ErrToolchainMismatch) {
		t.Fatalf("only image toolchains recorded: %v, want ErrToolchainMismatch", err)
	}
	docker := &pipeline.Pipeline{Runner: "docker", Steps: []pipeline.Step{{ID: "k", Kind: pipeline.KindCUDABuild, Image: "cuda"}}}
	if err := checkHostToolchain(t.Context(), docker, nil); err != nil {
		t.Fatalf("a docker build: %v, want no host check", err)
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
