package rebuild

import (
	"encoding/json"
	"fmt"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// RebuildLevel is the verified level a VSA of a matching rebuild claims,
// besides SLSA_BUILD_LEVEL_1: every subject was rebuilt bit for bit by
// the verifier from the recorded source.
const RebuildLevel = "GPUATTEST_REBUILD_LEVEL_1"

// VSA is the SLSA Verification Summary Attestation statement of a
// rebuild: about the provenance's subjects, for the source at its commit,
// from the bundles vr verified (entries, in order), PASSED only when the
// bundles verified and every subject matched. rep may be nil when no
// rebuild ran (the statement then says FAILED).
func VSA(rep *Report, vr *verify.Report, entries []verify.Entry, policy attest.VSAPolicy, version string) (*attest.Statement, error) {
	st, err := verify.VSA(vr, entries, policy, version)
	if err != nil {
		return nil, err
	}
	var v attest.VSA
	if err := json.Unmarshal(st.Predicate, &v); err != nil {
		return nil, fmt.Errorf("making a VSA: %w", err)
	}
	v.VerificationResult, v.VerifiedLevels = attest.VSAFailed, []string{}
	if vr.Verified && rep != nil && rep.Match {
		v.VerificationResult = attest.VSAPassed
		v.VerifiedLevels = []string{"SLSA_BUILD_LEVEL_1", RebuildLevel}
	}
	if rep != nil {
		if u := verify.SourceURI(&rep.Source); u != "" {
			v.ResourceURI = u
		}
	}
	return attest.VSAStatement(st.Subject, &v)
}
