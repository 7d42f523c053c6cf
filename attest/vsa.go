package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// VSAPredicateType is the SLSA Verification Summary Attestation v1
// predicate type.
const VSAPredicateType = "https://slsa.dev/verification_summary/v1"

// VerifierID identifies gpuattest as the verifier of its VSAs.
const VerifierID = "https://gpuattest.dev/verifier/v1"

// VSA results.
const (
	VSAPassed = "PASSED"
	VSAFailed = "FAILED"
)

// VSA is a SLSA Verification Summary Attestation v1 predicate: who
// verified what, against which policy, from which attestations, and the
// result.
type VSA struct {
	// Verifier identifies the verifier.
	Verifier VSAVerifier `json:"verifier"`
	// TimeVerified is when the verification ran.
	TimeVerified time.Time `json:"timeVerified"`
	// ResourceURI names the resource verified (the source repository at
	// its commit, or the release).
	ResourceURI string `json:"resourceUri"`
	// Policy names the policy the attestations were checked against.
	Policy VSAPolicy `json:"policy"`
	// InputAttestations are the bundles verified, with their digests.
	InputAttestations []ResourceDescriptor `json:"inputAttestations"`
	// VerificationResult is VSAPassed or VSAFailed.
	VerificationResult string `json:"verificationResult"`
	// VerifiedLevels are the SLSA levels (and gpuattest's own claims, as
	// GPUATTEST_*) verified; empty when the result is FAILED.
	VerifiedLevels []string `json:"verifiedLevels"`
	// SlsaVersion is the SLSA version of the levels.
	SlsaVersion string `json:"slsaVersion"`
}

// VSAVerifier is a VSA's verifier.
type VSAVerifier struct {
	// ID is VerifierID.
	ID string `json:"id"`
	// Version maps component to version.
	Version map[string]string `json:"version,omitempty"`
}

// VSAPolicy names a policy by URI and, for a file, digest.
type VSAPolicy struct {
	// URI names the policy.
	URI string `json:"uri"`
	// Digest is the policy file's digest, when it is a file.
	Digest map[string]string `json:"digest,omitempty"`
}

// VSAStatement is the in-toto statement of v about subjects (deduplicated
// by name and digest, sorted by name). It checks v's required fields.
func VSAStatement(subjects []Subject, v *VSA) (*Statement, error) {
	var errs []error
	if v.Verifier.ID == "" {
		errs = append(errs, errors.New("verifier.id: empty"))
	}
	if v.ResourceURI == "" {
		errs = append(errs, errors.New("resourceUri: empty"))
	}
	if v.Policy.URI == "" {
		errs = append(errs, errors.New("policy.uri: empty"))
	}
	if v.VerificationResult != VSAPassed && v.VerificationResult != VSAFailed {
		errs = append(errs, fmt.Errorf("verificationResult %q: expected PASSED or FAILED", v.VerificationResult))
	}
	if v.VerifiedLevels == nil {
		v.VerifiedLevels = []string{}
	}
	if v.InputAttestations == nil {
		v.InputAttestations = []ResourceDescriptor{}
	}
	seen := map[string]bool{}
	var subj []Subject
	for i, s := range subjects {
		if s.Name == "" || !hexSHA256.MatchString(s.Digest["sha256"]) {
			errs = append(errs, fmt.Errorf("subjects[%d]: expected a name and a sha256 digest", i))
			continue
		}
		if k := s.Name + "\x00" + s.Digest["sha256"]; !seen[k] {
			seen[k] = true
			subj = append(subj, Subject{Name: s.Name, Digest: map[string]string{"sha256": s.Digest["sha256"]}})
		}
	}
	if len(subj) == 0 {
		errs = append(errs, errors.New("no subjects: a VSA is about at least one artifact"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(subj, func(i, j int) bool { return subj[i].Name < subj[j].Name })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding VSA: %w", err)
	}
	return &Statement{Type: StatementType, Subject: subj, PredicateType: VSAPredicateType, Predicate: bytes.TrimSpace(buf.Bytes())}, nil
}
