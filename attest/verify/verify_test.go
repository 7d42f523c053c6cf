package verify_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// fixture is a key pair, an artifact and a bundle over it.
type fixture struct {
	dir      string
	kp       *sign.Keypair
	pubPath  string
	artifact verify.Artifact
	bundle   []byte
}

// newKey makes a key pair without the (deliberately slow) scrypt
// encryption; sign's own tests cover the key files.
func newKey(t testing.TB, dir, name string) (*sign.Keypair, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, name+".pub")
	if err := os.WriteFile(pub, []byte(pubPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	return kp, pub
}

func writeArtifact(t testing.TB, dir, name, content string) verify.Artifact {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := verify.DigestFile(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func signRun(t testing.TB, kp *sign.Keypair, run *attest.Run) []byte {
	t.Helper()
	st, err := attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	return signStatement(t, kp, st)
}

func signStatement(t testing.TB, kp *sign.Keypair, st *attest.Statement) []byte {
	t.Helper()
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Sign(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	kp, pub := newKey(t, dir, "release")
	a := writeArtifact(t, dir, "kernels.fatbin", "fatbin bytes")
	return &fixture{dir: dir, kp: kp, pubPath: pub, artifact: a, bundle: signRun(t, kp, attesttest.Run(false, a.SHA256))}
}

func mustPub(t testing.TB, path string) crypto.PublicKey {
	t.Helper()
	pub, err := sign.LoadPublicKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func (f *fixture) verify(t testing.TB, bundles []byte, arts []verify.Artifact, opts ...verify.Option) *verify.Report {
	t.Helper()
	pub := mustPub(t, f.pubPath)
	v, err := verify.New(append([]verify.Option{verify.WithKey(pub, f.pubPath)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := verify.ParseBundles("bundle.json", bundles)
	if err != nil {
		t.Fatal(err)
	}
	return v.Verify(t.Context(), entries, arts)
}

// editPayload decodes the bundle's DSSE payload, applies edit, and puts
// it back without re-signing.
func editPayload(t testing.TB, bundle []byte, edit func([]byte) []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(bundle, &m); err != nil {
		t.Fatal(err)
	}
	env := m["dsseEnvelope"].(map[string]any)
	p, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	env["payload"] = base64.StdEncoding.EncodeToString(edit(p))
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func failedChecks(r *verify.Report) []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c.Check+": "+c.Detail)
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.verify(t, f.bundle, []verify.Artifact{f.artifact})
	if !r.Verified || r.Failure != verify.FailureNone || r.VerificationResult != "PASSED" {
		t.Fatalf("not verified (failure %s): %v", r.Failure, failedChecks(r))
	}
	want := map[string]bool{verify.CheckSignature: false, verify.CheckPredicateType: false, verify.CheckSubject: false, verify.CheckPolicy: false}
	for _, c := range r.Checks {
		if _, ok := want[c.Check]; ok && c.Passed {
			want[c.Check] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no passing %s check in report", k)
		}
	}
	// The criteria are stated: signature, tlog/timestamps, predicate type,
	// the subject, the four default policy rules and target coverage.
	var crit []string
	for _, c := range r.Criteria {
		crit = append(crit, c.Check)
	}
	if got := strings.Join(crit, ","); got != "signature,tlog/timestamps,predicate type,subject,policy,policy,policy,policy,coverage" {
		t.Errorf("criteria = %s", got)
	}
	for _, c := range r.Criteria {
		if c.Result != verify.ResultPassed {
			t.Errorf("criterion %s %q: result %q", c.Check, c.Requirement, c.Result)
		}
	}
	if r.Bundles[0].Result != "passed" {
		t.Errorf("bundle result = %q", r.Bundles[0].Result)
	}
}

// TestCheckBundlesThenComplete: the two halves of Verify, the second
// given the artifacts later, verify as Verify does; a Checked is spent
// by Complete.
func TestCheckBundlesThenComplete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	v, err := verify.New(verify.WithKey(mustPub(t, f.pubPath), f.pubPath))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := verify.ParseBundles("bundle.json", f.bundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, arts := range [][]verify.Artifact{{f.artifact}, {{Name: "other", SHA256: strings.Repeat("0", 64)}}} {
		c := v.CheckBundles(t.Context(), entries)
		got, want := v.Complete(t.Context(), c, arts), v.Verify(t.Context(), entries, arts)
		if got.Verified != want.Verified || got.Failure != want.Failure || !slices.Equal(failedChecks(got), failedChecks(want)) || len(got.Checks) != len(want.Checks) {
			t.Errorf("artifacts %v: CheckBundles+Complete = %v %v, Verify = %v %v", arts, got.Failure, failedChecks(got), want.Failure, failedChecks(want))
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Complete called twice") {
					t.Errorf("a second Complete: recovered %v", r)
				}
			}()
			v.Complete(t.Context(), c, arts)
		}()
	}
}

func TestTamper(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := writeArtifact(t, f.dir, "other.fatbin", "other bytes")
	otherKey, _ := newKey(t, f.dir, "attacker")
	tests := []struct {
		name        string
		bundle      func() []byte
		artifact    verify.Artifact
		opts        []verify.Option
		wantFailure verify.Failure
	}{
		{
			name: "flipped payload byte",
			bundle: func() []byte {
				return editPayload(t, f.bundle, func(p []byte) []byte {
					p = bytes.Clone(p)
					p[len(p)/2] ^= 0x01
					return p
				})
			},
			wantFailure: verify.FailureSignature,
		},
		{
			name: "changed subject digest",
			bundle: func() []byte {
				return editPayload(t, f.bundle, func(p []byte) []byte {
					return bytes.Replace(p, []byte(f.artifact.SHA256), []byte(other.SHA256), 1)
				})
			},
			artifact:    other,
			wantFailure: verify.FailureSignature,
		},
		{
			name: "changed predicate field",
			bundle: func() []byte {
				return editPayload(t, f.bundle, func(p []byte) []byte {
					return bytes.Replace(p, []byte(`"median_ns":1200`), []byte(`"median_ns":900`), 1)
				})
			},
			wantFailure: verify.FailureSignature,
		},
		{
			name: "policy weakened by editing the predicate (simulated run claims real hardware)",
			bundle: func() []byte {
				b := signRun(t, f.kp, attesttest.Run(true, f.artifact.SHA256))
				return editPayload(t, b, func(p []byte) []byte {
					return bytes.Replace(p, []byte(`"simulated":true`), []byte(`"simulated":false`), -1)
				})
			},
			wantFailure: verify.FailureSignature,
		},
		{
			name: "payload type changed",
			bundle: func() []byte {
				return bytes.Replace(f.bundle, []byte(`"payloadType":"application/vnd.in-toto+json"`), []byte(`"payloadType":"application/json"`), 1)
			},
			wantFailure: verify.FailureSignature,
		},
		{
			name: "re-signed with another key",
			bundle: func() []byte {
				return signRun(t, otherKey, attesttest.Run(false, f.artifact.SHA256))
			},
			wantFailure: verify.FailureSignature,
		},
		{
			name:        "bundle swapped between artifacts",
			bundle:      func() []byte { return f.bundle },
			artifact:    other,
			wantFailure: verify.FailureSubject,
		},
		{
			name: "signed simulated run fails the default policy",
			bundle: func() []byte {
				return signRun(t, f.kp, attesttest.Run(true, f.artifact.SHA256))
			},
			wantFailure: verify.FailurePolicy,
		},
		{
			name: "signed failed run fails the default policy",
			bundle: func() []byte {
				run := attesttest.Run(false, f.artifact.SHA256)
				run.Steps[1].Verdict = "failed"
				return signRun(t, f.kp, run)
			},
			wantFailure: verify.FailurePolicy,
		},
		{
			name:        "other predicate type wanted",
			bundle:      func() []byte { return f.bundle },
			opts:        []verify.Option{verify.WithPredicateType(attest.ProvenancePredicateType)},
			wantFailure: verify.FailurePolicy,
		},
		{
			name: "message signature instead of an attestation",
			bundle: func() []byte {
				var m map[string]any
				_ = json.Unmarshal(f.bundle, &m)
				delete(m, "dsseEnvelope")
				m["messageSignature"] = map[string]any{
					"messageDigest": map[string]any{"algorithm": "SHA2_256", "digest": base64.StdEncoding.EncodeToString(make([]byte, 32))},
					"signature":     base64.StdEncoding.EncodeToString([]byte("sig")),
				}
				b, _ := json.Marshal(m)
				return b
			},
			wantFailure: verify.FailurePolicy,
		},
		{
			name: "signature removed",
			bundle: func() []byte {
				var m map[string]any
				_ = json.Unmarshal(f.bundle, &m)
				m["dsseEnvelope"].(map[string]any)["signatures"] = []any{}
				b, _ := json.Marshal(m)
				return b
			},
			wantFailure: verify.FailureSignature,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := f.artifact
			if tt.artifact.Name != "" {
				a = tt.artifact
			}
			r := f.verify(t, tt.bundle(), []verify.Artifact{a}, tt.opts...)
			if r.Verified || r.Failure != tt.wantFailure {
				t.Fatalf("failure = %s (verified %v), want %s; failed checks: %v", r.Failure, r.Verified, tt.wantFailure, failedChecks(r))
			}
			failedCrit := 0
			for _, c := range r.Criteria {
				if c.Result == verify.ResultFailed {
					failedCrit++
				}
			}
			if failedCrit == 0 {
				t.Errorf("no criterion marked failed: %+v", r.Criteria)
			}
		})
	}
}

func TestJSONLRelease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A release of 5 artifacts, each with its own bundle, plus a
	// provenance bundle, in one JSONL file.
	var arts []verify.Artifact
	var bundles [][]byte
	for i := range 5 {
		a := writeArtifact(t, f.dir, "k"+string(rune('0'+i))+".cubin", strings.Repeat("x", i+1))
		arts = append(arts, a)
		run := attesttest.Run(false, a.SHA256)
		bundles = append(bundles, signRun(t, f.kp, run))
		if i == 0 {
			st, err := attest.ProvenanceStatement(run)
			if err != nil {
				t.Fatal(err)
			}
			bundles = append(bundles, signStatement(t, f.kp, st))
		}
	}
	path := filepath.Join(f.dir, sign.JSONLName)
	if err := sign.AppendJSONL(path, bundles[:3]); err != nil {
		t.Fatal(err)
	}
	if err := sign.AppendJSONL(path, bundles[3:]); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n != 6 {
		t.Fatalf("%d lines, want 6", n)
	}
	r := f.verify(t, data, arts)
	if !r.Verified {
		t.Fatalf("release not verified (failure %s): %v", r.Failure, failedChecks(r))
	}
	if len(r.Bundles) != 6 {
		t.Errorf("%d bundles read, want 6", len(r.Bundles))
	}
	// The provenance statement verifies with its own predicate type.
	r = f.verify(t, data, arts[:1], verify.WithPredicateType(attest.ProvenancePredicateType))
	if !r.Verified {
		t.Fatalf("provenance not verified (failure %s): %v", r.Failure, failedChecks(r))
	}
	// One unknown artifact fails the whole call with 11.
	stranger := writeArtifact(t, f.dir, "stranger", "?")
	r = f.verify(t, data, append(arts, stranger))
	if r.Failure != verify.FailureSubject {
		t.Fatalf("failure = %s, want subject", r.Failure)
	}
}

func TestPolicyFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pol := func(expr string) *policy.Policy {
		p, err := policy.Parse("policy.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: r\n    expr: '"+expr+"'\n    message: m\n"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		expr string
		want verify.Failure
	}{
		{`predicate.hardware.gpus.exists(g, g.compute_capability == "9.0")`, verify.FailureNone},
		// vector_add median throughput >= 2800 GB/s on H100 (docs/verify.md's example).
		{h100Throughput(2800), verify.FailureNone},
		{h100Throughput(3000), verify.FailurePolicy},
		{`predicate.benchmarks.exists(b, b.case == "vector_add" && b.throughput.value >= 2800)`, verify.FailureNone},
		{`predicate.benchmarks.exists(b, b.case == "vector_add" && b.throughput.value >= 3000)`, verify.FailurePolicy},
		{`predicate.build.reproducible`, verify.FailureNone},
		{`subjects.exists(s, s.name == "build/kernels.fatbin")`, verify.FailureNone},
		{`predicateType == "https://gpuattest.dev/gpu-validation/v2"`, verify.FailureNone},
		{`predicate.no_such_field == 1`, verify.FailurePolicy},
	}
	for _, tt := range tests {
		r := f.verify(t, f.bundle, []verify.Artifact{f.artifact}, verify.WithPolicy(pol(tt.expr)))
		if r.Failure != tt.want {
			t.Errorf("%s: failure %s, want %s: %v", tt.expr, r.Failure, tt.want, failedChecks(r))
		}
	}
}

func TestNewRequiresMaterial(t *testing.T) {
	t.Parallel()
	if _, err := verify.New(); err == nil || !strings.Contains(err.Error(), "no verification material") {
		t.Errorf("err = %v", err)
	}
	if _, err := verify.New(verify.WithCertificateIdentity("a@b", "", "", "")); err == nil || !strings.Contains(err.Error(), "issuer") {
		t.Errorf("identity without issuer: err = %v", err)
	}
	if _, err := verify.New(verify.WithCertificateIdentity("a@b", "", "https://issuer", "")); err == nil || !strings.Contains(err.Error(), "--trusted-root") {
		t.Errorf("keyless without trusted root: err = %v", err)
	}
}

func TestParseBundles(t *testing.T) {
	t.Parallel()
	if es, err := verify.ParseBundles("x.jsonl", []byte("{}\nnot json\n")); err != nil || len(es) != 2 || es[1].Source != "x.jsonl:2" || !strings.Contains(es[1].Problem, "not a JSON document") {
		t.Errorf("got %+v, %v: want line 2 refused as not a bundle", es, err)
	}
	many := bytes.Repeat([]byte("{}\n"), verify.MaxBundles)
	if es, err := verify.ParseBundles("x.jsonl", many); err != nil || len(es) != verify.MaxBundles {
		t.Errorf("%d bundles: %d entries, %v", verify.MaxBundles, len(es), err)
	}
	if _, err := verify.ParseBundles("x.jsonl", append(many, "{}\n"...)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("x.jsonl:%d: more than %d bundles", verify.MaxBundles+1, verify.MaxBundles)) {
		t.Errorf("%d bundles: err = %v", verify.MaxBundles+1, err)
	}
	// An indented single bundle (.json) is one entry named by the file,
	// its data the whole document without the surrounding space.
	es, err := verify.ParseBundles("x.json", []byte("{\n  \"a\": 1\n}\n"))
	if err != nil || len(es) != 1 {
		t.Fatalf("indented single bundle: %v %d", err, len(es))
	}
	if es[0].Source != "x.json" || string(es[0].Data) != "{\n  \"a\": 1\n}" || es[0].Problem != "" {
		t.Errorf("indented single bundle: got %+v, want source x.json and the document", es[0])
	}
	if _, err := verify.ParseBundles("x.json", []byte(" \n\t")); err == nil || !strings.Contains(err.Error(), "x.json: no bundles") {
		t.Errorf("blank file: err = %v, want no bundles", err)
	}
}

// TestFailureText checks the failure kinds' names, in JSON both ways.
func TestFailureText(t *testing.T) {
	t.Parallel()
	for _, f := range []verify.Failure{verify.FailureNone, verify.FailureError, verify.FailureSignature, verify.FailureSubject, verify.FailurePolicy} {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var back verify.Failure
		if err := json.Unmarshal(b, &back); err != nil || back != f {
			t.Errorf("%s: round trip via %s gave %s, %v", f, b, back, err)
		}
	}
	if got := verify.FailureSubject.String(); got != "subject" {
		t.Errorf("String() = %q", got)
	}
	var f verify.Failure
	if err := json.Unmarshal([]byte(`"exit 10"`), &f); err == nil {
		t.Error("unknown failure name accepted")
	}
}

// TestPolicyCostLimit: a rule that the cost limit stops is an error (not
// decided), never "holds", and the budget spans all bundles of a call.
func TestPolicyCostLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := attesttest.Run(false, f.artifact.SHA256)
	for i := range 300 {
		run.Steps = append(run.Steps, attest.StepVerdict{ID: fmt.Sprintf("s%d", i), Kind: "test", Verdict: "passed"})
	}
	bundle := signRun(t, f.kp, run)
	p, err := policy.Parse("quadratic.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: ids unique\n    expr: 'predicate.steps.all(s, predicate.steps.exists_one(t, t.id == s.id))'\n"))
	if err != nil {
		t.Fatal(err)
	}
	// What the rule costs on this predicate.
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	res, err := prog.Evaluate(t.Context(), policy.Input{Predicate: st.Predicate})
	if err != nil || !res[0].Passed {
		t.Fatalf("rule: %+v, %v", res, err)
	}
	cost := res[0].Cost

	r := f.verify(t, bundle, []verify.Artifact{f.artifact}, verify.WithPolicy(p), verify.WithPolicyCostLimit(cost/2))
	if r.Failure != verify.FailureError {
		t.Fatalf("failure = %s, want error: %v", r.Failure, failedChecks(r))
	}
	last := r.Checks[len(r.Checks)-1]
	if last.Passed || !strings.Contains(last.Detail, "not decided") {
		t.Errorf("policy check = %+v", last)
	}
	// Two bundles share the budget: each alone fits, together they do not.
	limit := cost + cost/2
	if r := f.verify(t, bundle, nil, verify.WithPolicy(p), verify.WithPolicyCostLimit(limit)); !r.Verified {
		t.Fatalf("one bundle within %d: failure %s: %v", limit, r.Failure, failedChecks(r))
	}
	two := append(append(bytes.Clone(bundle), '\n'), bundle...)
	if r := f.verify(t, two, nil, verify.WithPolicy(p), verify.WithPolicyCostLimit(limit)); r.Failure != verify.FailureError {
		t.Errorf("two bundles within %d: failure %s, want error", limit, r.Failure)
	}
}

// TestLimits: inputs over a limit are refused as errors that name the
// limit, before the expensive work; within the limit they verify.
func TestLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := attesttest.Run(false, f.artifact.SHA256)
	for i := range 20_000 {
		run.Steps = append(run.Steps, attest.StepVerdict{ID: fmt.Sprintf("step-%06d", i), Kind: "test", Verdict: "passed"})
	}
	st, err := attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	big := signStatement(t, f.kp, st)
	arts := []verify.Artifact{f.artifact}
	if r := f.verify(t, big, arts); !r.Verified {
		t.Fatalf("within the default limit: failure %s: %v", r.Failure, failedChecks(r))
	}
	// The statement is over the limit, the bundle within its own.
	r := f.verify(t, big, arts, verify.WithMaxPredicateSize(int64(len(payload)-1)))
	if r.Failure != verify.FailureError || !strings.Contains(strings.Join(failedChecks(r), "\n"), "statement not read: it is ") ||
		!strings.Contains(strings.Join(failedChecks(r), "\n"), "--max-predicate-size") {
		t.Errorf("statement over the limit: failure %s: %v", r.Failure, failedChecks(r))
	}
	// The bundle itself is over the limit: not even parsed.
	r = f.verify(t, big, arts, verify.WithMaxPredicateSize(100_000))
	if r.Failure != verify.FailureError || !strings.Contains(strings.Join(failedChecks(r), "\n"), "bundle not read: it is ") {
		t.Errorf("bundle over the limit: failure %s: %v", r.Failure, failedChecks(r))
	}
	// A bundle nested too deep.
	deep := []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`)
	r = f.verify(t, deep, arts)
	if r.Failure != verify.FailureSignature || !strings.Contains(strings.Join(failedChecks(r), "\n"), "nesting deeper than 32 levels") {
		t.Errorf("deep bundle: failure %s: %v", r.Failure, failedChecks(r))
	}
	// A bundle file over the limit is not read.
	v, err := verify.New(verify.WithKey(mustPub(t, f.pubPath), f.pubPath), verify.WithMaxPredicateSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "big.jsonl")
	if err := os.WriteFile(path, bytes.Repeat([]byte(" "), 9<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ReadBundles(t.Context(), path); err == nil || !strings.Contains(err.Error(), "the most a bundle file may be") || !strings.Contains(err.Error(), "--max-predicate-size") {
		t.Errorf("ReadBundles over the limit: err = %v", err)
	}
	if _, err := verify.New(verify.WithKey(mustPub(t, f.pubPath), f.pubPath), verify.WithMaxPredicateSize(0)); err == nil {
		t.Error("a zero predicate size was accepted")
	}
}

// TestKeyHint: a bundle's key hint is advisory. An empty hint and a hint
// naming another key verify alike against the key given (the second with
// a note); the signature decides, as a bundle re-signed with another key
// and carrying the right hint shows. The DSSE signature's keyid is
// advisory too: one naming another key verified before only when empty.
func TestKeyHint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setHint := func(b []byte, hint string) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["verificationMaterial"].(map[string]any)["publicKey"].(map[string]any)["hint"] = hint
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var m map[string]any
	if err := json.Unmarshal(f.bundle, &m); err != nil {
		t.Fatal(err)
	}
	goodHint := m["verificationMaterial"].(map[string]any)["publicKey"].(map[string]any)["hint"].(string)
	other, _ := newKey(t, f.dir, "other")
	forged := setHint(signRun(t, other, attesttest.Run(false, f.artifact.SHA256)), goodHint)
	tests := []struct {
		name     string
		bundle   []byte
		want     verify.Failure
		wantNote bool
	}{
		{"right hint", f.bundle, verify.FailureNone, false},
		{"empty hint", setHint(f.bundle, ""), verify.FailureNone, false},
		{"hint of another key", setHint(f.bundle, "c29tZSBvdGhlciBrZXk="), verify.FailureNone, true},
		{"another key with the right hint", forged, verify.FailureSignature, false},
		{"DSSE keyid of another key", setKeyID(t, f.bundle, "another-key"), verify.FailureNone, false},
		{"another key with a DSSE keyid", setKeyID(t, forged, "another-key"), verify.FailureSignature, false},
	}
	for _, tt := range tests {
		r := f.verify(t, tt.bundle, []verify.Artifact{f.artifact})
		if r.Failure != tt.want {
			t.Errorf("%s: failure %s, want %s: %v", tt.name, r.Failure, tt.want, failedChecks(r))
			continue
		}
		note := strings.Contains(r.Checks[0].Detail, "hints are advisory")
		if note != tt.wantNote {
			t.Errorf("%s: signature detail %q: advisory note %v, want %v", tt.name, r.Checks[0].Detail, note, tt.wantNote)
		}
	}
}

// setKeyID sets the keyid of b's DSSE signature.
func setKeyID(t *testing.T, b []byte, keyid string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	sig := m["dsseEnvelope"].(map[string]any)["signatures"].([]any)[0].(map[string]any)
	sig["keyid"] = keyid
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoArtifacts: without artifacts the criteria and the report say that
// none was checked; WithArtifactsRequired makes it a subject failure.
func TestNoArtifacts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.verify(t, f.bundle, nil)
	if !r.Verified || len(r.Artifacts) != 0 {
		t.Fatalf("failure %s: %v", r.Failure, failedChecks(r))
	}
	var subj []verify.Criterion
	for _, c := range r.Criteria {
		if c.Check == verify.CheckSubject {
			subj = append(subj, c)
		}
	}
	if len(subj) != 1 || !strings.Contains(subj[0].Requirement, verify.NoArtifacts) || subj[0].Result != verify.ResultNotChecked {
		t.Errorf("subject criteria = %+v", subj)
	}
	r = f.verify(t, f.bundle, nil, verify.WithArtifactsRequired())
	if r.Failure != verify.FailureSubject {
		t.Errorf("required: failure %s, want subject: %v", r.Failure, failedChecks(r))
	}
	if r := f.verify(t, f.bundle, []verify.Artifact{f.artifact}, verify.WithArtifactsRequired()); !r.Verified {
		t.Errorf("required and given: failure %s: %v", r.Failure, failedChecks(r))
	}
}

// h100Throughput is the rule "vector_add median throughput >= gbps GB/s
// on H100": a benchmark case of that name whose throughput at the median
// reaches gbps, measured by a step that ran with backend cuda on real
// H100s only.
func h100Throughput(gbps int) string {
	return fmt.Sprintf(`predicate.benchmarks.exists(b, b.case == "vector_add"
  && b.throughput.unit == "GB/s" && b.throughput.value >= %d
  && predicate.steps.exists(s, s.id == b.step && s.backend == "cuda"
    && size(s.devices) > 0 && s.devices.all(d, d.name.contains("H100") && !d.simulated)))`, gbps)
}

// TestLeftOut: a bundle of a predicate type the Verifier leaves out
// (a fleet dispatch beside an ordinary release) is neither verified nor
// judged, whoever signed it, and a check says so; one of the Verifier's
// own predicate type is never left out.
func TestLeftOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stranger, _ := newKey(t, f.dir, "stranger")
	const leftOut = "https://gpuattest.dev/fleet-dispatch/v1"
	foreign := signStatement(t, stranger, &attest.Statement{Type: attest.StatementType, PredicateType: leftOut, Predicate: []byte(`{}`),
		Subject: []attest.Subject{{Name: "kernels.fatbin", Digest: map[string]string{"sha256": f.artifact.SHA256}}}})
	bundles := append(append(append([]byte{}, f.bundle...), '\n'), foreign...)
	if r := f.verify(t, bundles, []verify.Artifact{f.artifact}); r.Verified || r.Failure != verify.FailureSignature {
		t.Errorf("without WithLeftOut: verified %v, failure %v; want the stranger's bundle to fail the signature check", r.Verified, r.Failure)
	}
	r := f.verify(t, bundles, []verify.Artifact{f.artifact}, verify.WithLeftOut(leftOut))
	if !r.Verified || len(r.Bundles) != 1 {
		t.Fatalf("with WithLeftOut: verified %v, %d bundle(s), failed %v; want verified over the validation bundle alone", r.Verified, len(r.Bundles), failedChecks(r))
	}
	left := 0
	for _, c := range r.Checks {
		if c.Passed && strings.Contains(c.Detail, "left out, unverified: predicate type "+leftOut) {
			left++
		}
	}
	if left != 1 {
		t.Errorf("%d checks say a bundle was left out, want 1: %+v", left, r.Checks)
	}
	// The Verifier's own predicate type is judged, whatever WithLeftOut says.
	if r := f.verify(t, bundles, []verify.Artifact{f.artifact}, verify.WithLeftOut(attest.ValidationPredicateType, leftOut)); !r.Verified || len(r.Bundles) != 1 {
		t.Errorf("leaving out the Verifier's own type: verified %v, %d bundle(s); want the validation bundle judged", r.Verified, len(r.Bundles))
	}
	if r := f.verify(t, foreign, nil, verify.WithLeftOut(leftOut)); r.Verified {
		t.Errorf("only a bundle left out: verified; want no bundle of the predicate type")
	}
}
