package run

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
)

// AttestationsFile is the name of the signed bundles in a run directory.
const AttestationsFile = rundir.AttestationsFile

// Attestation is what Attest signed.
type Attestation struct {
	// File is the JSONL file of Sigstore bundles, one per line.
	File string `json:"file"`
	// Signer names the key or identity that signed.
	Signer string `json:"signer"`
	// Statements are the predicate types signed, in file order.
	Statements []string `json:"predicate_types"`
	// Subjects is the number of released artifacts.
	Subjects int `json:"subjects"`
	// Result is the validation predicate's result: passed or failed.
	Result string `json:"result"`
	// Release is the digest of the artifacts' OCI release manifest (what
	// Push publishes), a subject of every statement; empty when an
	// artifact has no copy in the run directory (its step failed).
	Release string `json:"release,omitempty"`
}

// Attest builds the statements of the run in dir, made from p (the GPU
// validation predicate, and SLSA provenance when the run built something),
// signs them and writes AttestationsFile into dir, replacing an older one
// atomically. Every verdict is re-derived from the files behind it first
// (rundir.Run.Recheck): a run.json edited to turn a failure into a pass is
// refused, and nothing is written. Besides the artifacts, the statements'
// subjects name the digest of their OCI release manifest
// (oci.ManifestSubjectName), made from the run directory's copies, so
// that registry tools verify what Push publishes.
func Attest(ctx context.Context, signer *sign.Signer, p *pipeline.Pipeline, dir string) (*Attestation, error) {
	rd, err := rundir.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := rd.Recheck(p); err != nil {
		return nil, fmt.Errorf("refusing to sign: %w", err)
	}
	run, err := collect.FromRun(rd, p)
	if err != nil {
		return nil, err
	}
	if len(run.Artifacts) == 0 {
		return nil, errors.New("the run released no artifacts, so there is nothing to attest\nhint: cuda-build steps release their fatbins/cubins, exec steps their declared outputs")
	}
	// The release manifest is fixed by the files, so registries' digest
	// is signed too (attest/oci).
	rel, hasRelease, err := releaseOf(ctx, rd, run.Artifacts)
	if err != nil {
		return nil, fmt.Errorf("refusing to sign: %w", err)
	}
	files := len(run.Artifacts)
	if hasRelease {
		run.Artifacts = append(run.Artifacts, manifestSubject(rel))
	}
	run.URL = ciRunURL(os.Getenv)
	stmts, err := statements(run)
	if err != nil {
		return nil, err
	}
	bundles, err := sign.SignStatements(ctx, signer, stmts)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, AttestationsFile)
	if err := sign.WriteJSONL(file, bundles); err != nil {
		return nil, err
	}
	out := &Attestation{File: file, Signer: signer.Identity(), Subjects: files, Result: attest.ResultPassed}
	if hasRelease {
		out.Release = rel.Digest()
	}
	if run.RunError != "" {
		out.Result = attest.ResultFailed
	}
	for _, st := range stmts {
		out.Statements = append(out.Statements, st.PredicateType)
	}
	return out, nil
}

// statements are the run's statements: GPU validation, an in-toto
// test-result for each test, benchmark and burn-in step, and provenance
// when it built something.
func statements(run *attest.Run) ([]*attest.Statement, error) {
	val, err := attest.ValidationStatement(run)
	if err != nil {
		return nil, err
	}
	tests, err := attest.TestResultStatements(run)
	if err != nil {
		return nil, err
	}
	stmts := append([]*attest.Statement{val}, tests...)
	if run.Build != nil {
		prov, err := attest.ProvenanceStatement(run)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, prov)
	}
	return stmts, nil
}

// ciRunURL is the URL of the CI job signing the run, when it runs in one
// that says (GitHub Actions, GitLab CI): the test-result statements'
// url. Anything that is not an http(s) URL is left out.
func ciRunURL(getenv func(string) string) string {
	u := getenv("CI_JOB_URL")
	if server, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID"); server != "" && repo != "" && id != "" {
		u = server + "/" + repo + "/actions/runs/" + id
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil {
		return ""
	}
	return u
}
