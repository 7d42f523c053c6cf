package verify_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// TestVSANamesOnlyJudgedBundles: with artifacts given, the policy runs
// only on the bundles that cover them; a failed bundle in the same file
// that covers none of them was never judged, and its subjects must not
// enter the PASSED VSA (issue 21, item 2).
func TestVSANamesOnlyJudgedBundles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := writeArtifact(t, f.dir, "other.fatbin", "another kernel")
	failedRun := attesttest.Run(false, other.SHA256)
	failedRun.Steps[1].Verdict = "failed"
	bad := signRun(t, f.kp, failedRun)
	file := append(append(append([]byte(nil), f.bundle...), '\n'), bad...)
	entries, err := verify.ParseBundles("bundles.jsonl", file)
	if err != nil {
		t.Fatal(err)
	}

	// Alone, the failed bundle does not verify.
	if r := f.verify(t, bad, []verify.Artifact{other}); r.Verified {
		t.Fatal("the failed bundle verified alone")
	}

	r := f.verify(t, file, []verify.Artifact{f.artifact})
	if !r.Verified {
		t.Fatalf("not verified: %v", failedChecks(r))
	}
	if !r.Bundles[0].Judged || r.Bundles[1].Judged {
		t.Fatalf("judged = %v, %v; want the covering bundle only", r.Bundles[0].Judged, r.Bundles[1].Judged)
	}
	st, err := verify.VSA(r, entries, attest.VSAPolicy{URI: "p"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Subject {
		if s.Digest["sha256"] == other.SHA256 {
			t.Fatalf("the VSA names %s, the subject of a bundle the policy never evaluated", s.Name)
		}
	}
	if len(st.Subject) == 0 {
		t.Fatal("the VSA names no subject")
	}
	var v attest.VSA
	if err := json.Unmarshal(st.Predicate, &v); err != nil {
		t.Fatal(err)
	}
	if v.VerificationResult != attest.VSAPassed || len(v.InputAttestations) != 1 {
		t.Fatalf("result %s with %d input attestations, want PASSED from 1", v.VerificationResult, len(v.InputAttestations))
	}

	// Without artifacts both bundles are judged, and the failed one fails
	// the verification.
	if r := f.verify(t, file, nil); r.Verified || !bytes.Contains(mustJSON(t, r), []byte(`"judged":true`)) {
		t.Fatalf("without artifacts: verified=%v, want a failure with both bundles judged", r.Verified)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
