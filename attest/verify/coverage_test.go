package verify_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// boxRun is a passing run on one real GPU of compute capability cc
// (gpu 1 of the fixture is the A100, 0 the H100) over the artifacts, each
// statement also naming manifest as the release manifest.
func boxRun(gpu int, manifest string, arts ...verify.Artifact) *attest.Run {
	r := attesttest.Run(false, arts[0].SHA256)
	g := r.Hardware.GPUs[gpu]
	dev := []attest.Device{{UUID: g.UUID, Name: g.Name, ComputeCapability: g.ComputeCapability}}
	r.Steps[1].Devices, r.Steps[2].Devices = dev, dev
	r.Artifacts = nil
	for _, a := range arts {
		r.Artifacts = append(r.Artifacts, attest.FileDigest{Path: a.Name, SHA256: a.SHA256})
	}
	r.Artifacts = append(r.Artifacts, attest.FileDigest{Path: attest.ManifestSubjectName, SHA256: manifest})
	return r
}

// TestCoverageAcrossBundles: the default policy covers a release's pinned
// targets (sm_80, sm_90) from bundles of different machines; each
// artifact only from the bundles that name it; the release manifest's
// subject covers nothing.
func TestCoverageAcrossBundles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k := writeArtifact(t, f.dir, "k.fatbin", "kernels")
	other := writeArtifact(t, f.dir, "other.fatbin", "other kernels")
	manifest := writeArtifact(t, f.dir, "manifest.json", "{}")
	a100 := signRun(t, f.kp, boxRun(1, manifest.SHA256, k, other))
	h100 := signRun(t, f.kp, boxRun(0, manifest.SHA256, k))
	jsonl := func(bs ...[]byte) []byte { return append(bytes.Join(bs, []byte("\n")), '\n') }
	tests := []struct {
		name    string
		bundles []byte
		arts    []verify.Artifact
		want    verify.Failure
		detail  string
	}{
		{"a100 alone", a100, []verify.Artifact{k}, verify.FailurePolicy, "k.fatbin: sm_90: sm_90 missing"},
		{"h100 alone", h100, []verify.Artifact{k}, verify.FailurePolicy, "k.fatbin: sm_80: sm_80 missing"},
		{"both", jsonl(a100, h100), []verify.Artifact{k}, verify.FailureNone, ""},
		{"both, no artifact", jsonl(a100, h100), nil, verify.FailureNone, ""},
		// other.fatbin was validated on the A100 only.
		{"both, an artifact one box ran", jsonl(a100, h100), []verify.Artifact{k, other}, verify.FailurePolicy, "other.fatbin: sm_90: sm_90 missing"},
		// The manifest subject is skipped where a file is given; given
		// alone, the bundles that name it are taken together.
		{"the manifest alone", jsonl(a100, h100), []verify.Artifact{manifest}, verify.FailureNone, ""},
		{"the manifest alone, one box", a100, []verify.Artifact{manifest}, verify.FailurePolicy, "manifest.json: sm_90: sm_90 missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := f.verify(t, tt.bundles, tt.arts)
			if r.Failure != tt.want {
				t.Fatalf("failure %s, want %s: %v", r.Failure, tt.want, failedChecks(r))
			}
			var got []string
			for _, c := range r.Checks {
				if c.Check == verify.CheckCoverage && !c.Passed {
					got = append(got, c.Target+": "+c.Detail)
				}
			}
			if tt.detail != "" && !strings.Contains(strings.Join(got, "\n"), tt.detail) {
				t.Errorf("coverage failures lack %q: %q", tt.detail, got)
			}
			if len(r.Coverage) == 0 {
				t.Errorf("no coverage in the report")
			}
		})
	}
}

// TestSimulatedAccepted: simulated runs fail the default policy; with
// WithSimulatedAllowed they pass, and the criteria and report say so.
func TestSimulatedAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sim := signRun(t, f.kp, attesttest.Run(true, f.artifact.SHA256))
	if r := f.verify(t, sim, []verify.Artifact{f.artifact}); r.Failure != verify.FailurePolicy {
		t.Fatalf("simulated run: failure %s, want policy", r.Failure)
	}
	r := f.verify(t, sim, []verify.Artifact{f.artifact}, verify.WithSimulatedAllowed())
	if !r.Verified || !r.SimulatedAccepted {
		t.Fatalf("with simulated allowed: verified %v, simulatedAccepted %v: %v", r.Verified, r.SimulatedAccepted, failedChecks(r))
	}
	found := false
	for _, c := range r.Criteria {
		found = found || c.Check == verify.CheckSimulated && c.Requirement == verify.SimulatedAccepted
	}
	if !found {
		t.Errorf("criteria do not say simulated hardware is accepted: %+v", r.Criteria)
	}
}

// TestCaseVariantKeys: a predicate read by the rules, coverage and the
// report is read by exact key everywhere. A "Result" or "Steps" key next
// to "result" and "steps" (JSON allows both) neither shows a result the
// rules did not judge nor covers a target with runs the rules never saw.
func TestCaseVariantKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st, err := attest.ValidationStatement(attesttest.Run(false, f.artifact.SHA256))
	if err != nil {
		t.Fatal(err)
	}
	var pred map[string]json.RawMessage
	if err := json.Unmarshal(st.Predicate, &pred); err != nil {
		t.Fatal(err)
	}
	// The rules see a failed run whose suites ran on no GPU; the
	// case-variant keys, last in the object, say otherwise.
	var steps []map[string]any
	if err := json.Unmarshal(pred["steps"], &steps); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		delete(s, "devices")
	}
	cpuSteps, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	gpuSteps := pred["steps"]
	pred["result"], pred["steps"] = json.RawMessage(`"failed"`), cpuSteps
	b, err := json.Marshal(pred)
	if err != nil {
		t.Fatal(err)
	}
	st.Predicate = append(append(b[:len(b)-1:len(b)-1], `,"Result":"passed","Steps":`...), append(gpuSteps, '}')...)
	// gpuattest sign refuses such a predicate (the schema has no
	// "Result"), so another tool signs it with the release key.
	payload, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := sgsign.Bundle(&sgsign.DSSEData{Data: payload, PayloadType: attest.PayloadType}, f.kp, sgsign.BundleOptions{Context: t.Context()})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	r := f.verify(t, bundle, []verify.Artifact{f.artifact})
	if r.Verified || len(r.Bundles) != 1 || !r.Bundles[0].Verified {
		t.Fatalf("verified %v, %d bundles: want a policy failure", r.Verified, len(r.Bundles))
	}
	if got := r.Bundles[0].Result; got != "failed" {
		t.Errorf("report's result %q, want the rules' %q", got, "failed")
	}
	for _, res := range r.Coverage {
		for _, tc := range res.Targets {
			if tc.Covered {
				t.Errorf("target %s covered by runs the rules never saw: %s", tc.Target, tc.Detail)
			}
		}
	}
	if len(r.Coverage) == 0 {
		t.Errorf("no coverage in the report")
	}
}
