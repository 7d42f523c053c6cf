package rebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// RebuildLevel is the verified level a VSA of a matching rebuild claims,
// besides SLSA_BUILD_LEVEL_1: every subject was rebuilt bit for bit by
// the verifier from the recorded source.
const RebuildLevel = "GPUATTEST_REBUILD_LEVEL_1"

// VSA is the SLSA Verification Summary Attestation statement of a
// rebuild. It is about exactly the artifacts the rebuild compared (the
// subjects of the one provenance it rebuilt, rep.Artifacts), from that
// provenance's bundle alone (prov, as an input attestation), for the
// source as this rebuild checked it out (rep.Source: the checkout's
// remote and commit, not what the provenance claims). It says PASSED
// only when every one of those artifacts was rebuilt and matched; no
// other bundle read beside the provenance adds a subject. verifiedAt is
// when the provenance's bundle was verified.
func VSA(rep *Report, prov verify.Entry, verifiedAt time.Time, policy attest.VSAPolicy, version string) (*attest.Statement, error) {
	if rep == nil || len(rep.Artifacts) == 0 {
		return nil, errors.New("making a VSA: the rebuild compared no artifact")
	}
	sum := sha256.Sum256(prov.Data)
	v := &attest.VSA{
		Verifier:           attest.VSAVerifier{ID: attest.VerifierID, Version: map[string]string{"gpuattest": version}},
		TimeVerified:       verifiedAt.UTC(),
		Policy:             policy,
		InputAttestations:  []attest.ResourceDescriptor{{URI: prov.Source, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}}},
		VerificationResult: attest.VSAFailed,
		VerifiedLevels:     []string{},
		SlsaVersion:        "1.0",
	}
	match := rep.Match
	subjects := make([]attest.Subject, 0, len(rep.Artifacts))
	for _, a := range rep.Artifacts {
		match = match && a.Match && a.Rebuilt == a.Expected
		subjects = append(subjects, attest.Subject{Name: a.Name, Digest: map[string]string{"sha256": strings.TrimPrefix(a.Expected, "sha256:")}})
	}
	if match {
		v.VerificationResult = attest.VSAPassed
		v.VerifiedLevels = []string{"SLSA_BUILD_LEVEL_1", RebuildLevel}
	}
	v.ResourceURI = verify.SourceURI(&rep.Source)
	if v.ResourceURI == "" {
		// A checkout with no remote names no repository: the release
		// (or its first artifact) is the resource.
		v.ResourceURI = verify.SubjectURI(subjects)
	}
	return attest.VSAStatement(subjects, v)
}
