package attest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
)

// The provenance records the source commit as a gitCommit dependency and
// in the external parameters, the build steps, and each toolchain binary
// with the image it is in; an image given as a path is refused.
func TestProvenanceSourceAndSteps(t *testing.T) {
	t.Parallel()
	run := attesttest.Run(true, hexOf('c'))
	run.Source = &attest.Source{URI: "git+https://example.com/org/k.git", Commit: strings.Repeat("ab", 20)}
	run.BuildSteps = []attest.BuildStep{{ID: "k", Kind: "cuda-build", Workdir: ".", Runner: "docker", Image: "oci://example.com/cuda@sha256:" + hexOf('d'),
		Commands: [][]string{{"nvcc", "-fatbin", "k.cu"}}}}
	run.Toolchain = append(run.Toolchain, attest.Tool{Name: "ptxas", Version: "12.4", SHA256: hexOf('e'), Path: "/usr/local/cuda/bin/ptxas", Image: run.BuildSteps[0].Image})
	st, err := attest.ProvenanceStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	var p attest.Provenance
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		t.Fatal(err)
	}
	ext := p.BuildDefinition.ExternalParameters
	if diff := cmp.Diff(run.Source, ext.Source); diff != "" {
		t.Errorf("externalParameters.source (-want +got):\n%s", diff)
	}
	if ext.Pipeline.Digest != run.PipelineDigest || len(ext.BuildSteps) != 1 || ext.BuildSteps[0].Commands[0][0] != "nvcc" {
		t.Errorf("externalParameters: %+v", ext)
	}
	deps := p.BuildDefinition.ResolvedDependencies
	if deps[0].Name != "source" || deps[0].Digest[attest.GitCommitDigest] != run.Source.Commit || deps[0].URI != run.Source.URI {
		t.Errorf("first dependency %+v, want the source with its gitCommit", deps[0])
	}
	last := deps[len(deps)-1]
	if last.Name != "ptxas" || last.Annotations["image"] != run.BuildSteps[0].Image || last.Digest["sha256"] != hexOf('e') {
		t.Errorf("ptxas dependency %+v, want its digest and image", last)
	}
	run.BuildSteps[0].Image = "/home/me/images/cuda.tar"
	if _, err := attest.ProvenanceStatement(run); err == nil || !strings.Contains(err.Error(), "never a path") {
		t.Errorf("an image path: %v, want it refused", err)
	}
	run.BuildSteps[0].Image = ""
	run.Source.Commit = "main"
	if _, err := attest.ProvenanceStatement(run); err == nil || !strings.Contains(err.Error(), "source: commit") {
		t.Errorf("a branch name as commit: %v, want it refused", err)
	}
}

func TestVSAStatement(t *testing.T) {
	t.Parallel()
	subj := []attest.Subject{{Name: "b", Digest: map[string]string{"sha256": hexOf('b')}}, {Name: "a", Digest: map[string]string{"sha256": hexOf('a')}}, {Name: "b", Digest: map[string]string{"sha256": hexOf('b')}}}
	v := &attest.VSA{Verifier: attest.VSAVerifier{ID: attest.VerifierID}, ResourceURI: "git+https://example.com/k.git@" + strings.Repeat("ab", 20),
		Policy: attest.VSAPolicy{URI: "https://gpuattest.dev/policy/default"}, VerificationResult: attest.VSAPassed, VerifiedLevels: []string{"SLSA_BUILD_LEVEL_1"}, SlsaVersion: "1.0"}
	st, err := attest.VSAStatement(subj, v)
	if err != nil {
		t.Fatal(err)
	}
	if st.PredicateType != attest.VSAPredicateType || len(st.Subject) != 2 || st.Subject[0].Name != "a" {
		t.Fatalf("statement %+v, want two sorted subjects of the VSA type", st)
	}
	if err := st.Validate(); err != nil {
		t.Fatalf("the VSA statement does not parse as verify parses it: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(st.Predicate, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"verifier", "timeVerified", "resourceUri", "policy", "inputAttestations", "verificationResult", "verifiedLevels"} {
		if _, ok := got[k]; !ok {
			t.Errorf("VSA predicate has no %s: %s", k, st.Predicate)
		}
	}
	bad := *v
	bad.VerificationResult, bad.ResourceURI = "OK", ""
	if _, err := attest.VSAStatement(subj, &bad); err == nil || !strings.Contains(err.Error(), "verificationResult") || !strings.Contains(err.Error(), "resourceUri") {
		t.Errorf("an invalid VSA: %v, want every problem named", err)
	}
}
