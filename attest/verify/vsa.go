package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gpuattest/gpuattest/attest"
)

// VSA is the SLSA Verification Summary Attestation statement of a
// verification: the subjects of the bundles the criteria were applied to
// (BundleResult.Judged: verified, of the report's predicate type and,
// when artifacts were given, naming one of them), the policy as given,
// those bundles as input attestations (by the sha256 of their JSON), and
// PASSED or FAILED. A bundle that was read but not judged (another
// predicate type, or covering none of the given artifacts) adds nothing:
// the VSA vouches only for what the policy saw. The
// resource is the source the predicates record (git+URI@commit), else
// the release manifest, else the first subject. entries are the ones the
// report was made from, in order.
func VSA(r *Report, entries []Entry, policy attest.VSAPolicy, version string) (*attest.Statement, error) {
	if len(entries) != len(r.Bundles) {
		return nil, errors.New("making a VSA: the report and the entries differ in number")
	}
	v := &attest.VSA{
		Verifier:           attest.VSAVerifier{ID: attest.VerifierID, Version: map[string]string{"gpuattest": version}},
		TimeVerified:       r.VerifiedAt.UTC(),
		Policy:             policy,
		VerificationResult: r.VerificationResult,
		SlsaVersion:        "1.0",
	}
	if r.Verified {
		v.VerifiedLevels = []string{"GPUATTEST_VALIDATION_LEVEL_1"}
	}
	var subjects []attest.Subject
	for i := range r.Bundles {
		b := &r.Bundles[i]
		st := b.Statement()
		if !b.Judged || st == nil || st.PredicateType != r.PredicateType {
			continue
		}
		sum := sha256.Sum256(entries[i].Data)
		v.InputAttestations = append(v.InputAttestations, attest.ResourceDescriptor{URI: entries[i].Source, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}})
		subjects = append(subjects, st.Subject...)
		if v.ResourceURI == "" {
			v.ResourceURI = sourceURI(st)
		}
	}
	if v.ResourceURI == "" {
		v.ResourceURI = SubjectURI(subjects)
	}
	return attest.VSAStatement(subjects, v)
}

// sourceURI is git+URI@commit of the source a statement's predicate
// records, or "".
func sourceURI(st *attest.Statement) string {
	var p struct {
		Source          *attest.Source `json:"source"`
		BuildDefinition struct {
			ExternalParameters struct {
				Source *attest.Source `json:"source"`
			} `json:"externalParameters"`
		} `json:"buildDefinition"`
	}
	if json.Unmarshal(st.Predicate, &p) != nil {
		return ""
	}
	src := p.Source
	if src == nil {
		src = p.BuildDefinition.ExternalParameters.Source
	}
	return SourceURI(src)
}

// SourceURI is "URI@commit" of src (URI as recorded, git+https://...), or
// "" when src is nil or has no URI.
func SourceURI(src *attest.Source) string {
	if src == nil || src.URI == "" || src.Commit == "" {
		return ""
	}
	return src.URI + "@" + src.Commit
}

// SubjectURI names the release manifest subject
// (oci:release-manifest@sha256:HEX), else the first subject
// (NAME@sha256:HEX), or "" when there is none.
func SubjectURI(subjects []attest.Subject) string {
	for _, s := range subjects {
		if s.Name == "oci:release-manifest" {
			return "oci:release-manifest@sha256:" + s.Digest["sha256"]
		}
	}
	if len(subjects) > 0 {
		return fmt.Sprintf("%s@sha256:%s", subjects[0].Name, subjects[0].Digest["sha256"])
	}
	return ""
}
