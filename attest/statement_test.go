package attest_test

import (
	"bytes"
	"encoding/json"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestValidationStatement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		edit       func(*attest.Run)
		wantResult string
		wantFailed []string
		wantErr    string
	}{
		{name: "passed", wantResult: "passed", wantFailed: []string{}},
		{name: "cached counts as passed", edit: func(r *attest.Run) { r.Steps[0].Verdict = "cached" }, wantResult: "passed", wantFailed: []string{}},
		{name: "failed step", edit: func(r *attest.Run) { r.Steps[1].Verdict = "failed"; r.Steps[1].Reason = "2 tests failed" }, wantResult: "failed", wantFailed: []string{"test"}},
		{name: "skipped and error steps", edit: func(r *attest.Run) { r.Steps[1].Verdict = "error"; r.Steps[2].Verdict = "skipped" }, wantResult: "failed", wantFailed: []string{"test", "bench"}},
		{name: "failed preflight", edit: func(r *attest.Run) {
			r.Preflight = []attest.PreflightCheck{{Check: "ecc", Status: "failed", Message: "ECC disabled"}, {Check: "clocks", Status: "passed"}}
		}, wantResult: "failed", wantFailed: []string{"preflight/ecc"}},
		{name: "run error", edit: func(r *attest.Run) { r.RunError = "interrupted" }, wantResult: "failed", wantFailed: []string{}},
		{name: "no hardware", edit: func(r *attest.Run) { r.Hardware = nil }, wantErr: "no hardware record"},
		{name: "hardware edited after collection", edit: func(r *attest.Run) { r.Hardware.Host.CPUModel = "other" }, wantErr: "hardware: hardware record digest"},
		{name: "bad pipeline digest", edit: func(r *attest.Run) { r.PipelineDigest = "abc" }, wantErr: "pipeline_digest \"abc\""},
		{name: "no artifacts", edit: func(r *attest.Run) { r.Artifacts = nil }, wantErr: "no subjects"},
		{name: "bad artifact digest", edit: func(r *attest.Run) { r.Artifacts[0].SHA256 = "XYZ" }, wantErr: "artifacts[0].sha256"},
		{name: "no steps", edit: func(r *attest.Run) { r.Steps = nil }, wantErr: "steps: the run has no steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := attesttest.Run(true, hexOf('c'))
			if tt.edit != nil {
				tt.edit(run)
			}
			st, err := attest.ValidationStatement(run)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var p attest.ValidationPredicate
			if err := json.Unmarshal(st.Predicate, &p); err != nil {
				t.Fatal(err)
			}
			if p.Result != tt.wantResult {
				t.Errorf("result = %q, want %q", p.Result, tt.wantResult)
			}
			if p.RunError != run.RunError {
				t.Errorf("run_error = %q, want %q", p.RunError, run.RunError)
			}
			if diff := cmp.Diff(tt.wantFailed, p.FailedSteps); diff != "" {
				t.Errorf("failed_steps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidationStatementContent(t *testing.T) {
	t.Parallel()
	run := attesttest.Run(true, hexOf('c'))
	st, err := attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	wantSubj := []attest.Subject{{Name: "build/kernels.fatbin", Digest: map[string]string{"sha256": hexOf('c')}}}
	if diff := cmp.Diff(wantSubj, st.Subject); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://gpuattest.dev/gpu-validation/v2" {
		t.Errorf("type %q predicateType %q", st.Type, st.PredicateType)
	}
	var p attest.ValidationPredicate
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		t.Fatal(err)
	}
	// The hardware record is embedded whole and decodes as one, its own
	// digest checked: the predicate's one hardware digest.
	hw, err := hardware.Decode(p.Hardware)
	if err != nil {
		t.Fatalf("embedded hardware record: %v", err)
	}
	if diff := cmp.Diff(run.Hardware, hw); diff != "" {
		t.Errorf("hardware (-run +predicate):\n%s", diff)
	}
	if bytes.Contains(st.Predicate, []byte(`"hardware_digest"`)) {
		t.Error("the predicate carries a second hardware digest")
	}
	if !p.Simulated {
		t.Error("simulated not lifted from the hardware record")
	}
	if p.Build == nil || p.Build.Reproducible == nil || !*p.Build.Reproducible || len(p.Build.Artifacts[0].Cubins) != 2 {
		t.Errorf("build facts lost: %+v", p.Build)
	}
	if len(p.Benchmarks) != 1 || p.Benchmarks[0].Throughput.Value != 2950 {
		t.Errorf("benchmarks lost: %+v", p.Benchmarks)
	}
	// snake_case keys.
	for _, k := range []string{`"digest"`, `"failed_steps"`, `"pipeline_digest"`, `"gpuattest_version"`, `"median_ns"`, `"ci_low_ns"`, `"sass_archs"`} {
		if !bytes.Contains(st.Predicate, []byte(k)) {
			t.Errorf("predicate lacks key %s", k)
		}
	}
	// Marshal round-trips through in-toto's own Statement validation.
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := attest.ParseStatement(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestPredicateMatchesSchema(t *testing.T) {
	t.Parallel()
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("../schemas/predicate.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, verdict := range []string{"passed", "failed"} {
		run := attesttest.Run(true, hexOf('c'))
		run.Steps[1].Verdict = verdict
		st, err := attest.ValidationStatement(run)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(st.Predicate))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s predicate does not match schema: %v", verdict, err)
		}
	}
	// And the schema rejects a predicate with an invalid result.
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"result":"maybe"}`))
	if err := sch.Validate(v); err == nil {
		t.Error("schema accepted result \"maybe\"")
	}
}

func TestProvenanceStatement(t *testing.T) {
	t.Parallel()
	run := attesttest.Run(true, hexOf('c'))
	st, err := attest.ProvenanceStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	if st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Errorf("predicateType = %q", st.PredicateType)
	}
	var p attest.Provenance
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		t.Fatal(err)
	}
	if p.BuildDefinition.BuildType != "https://gpuattest.dev/build/v1" {
		t.Errorf("buildType = %q", p.BuildDefinition.BuildType)
	}
	if p.RunDetails.Builder.ID != attest.BuilderContainer {
		t.Errorf("builder.id = %q, want container builder (build ran in docker)", p.RunDetails.Builder.ID)
	}
	var names []string
	for _, d := range p.BuildDefinition.ResolvedDependencies {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"pipeline", "lock", "cuda", "nvcc"}, names); diff != "" {
		t.Errorf("resolvedDependencies (-want +got):\n%s", diff)
	}
	if len(p.RunDetails.Byproducts) != 1 {
		t.Errorf("byproducts = %+v", p.RunDetails.Byproducts)
	}
	run.Steps[0].Runner = "host"
	st, err = attest.ProvenanceStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		t.Fatal(err)
	}
	if p.RunDetails.Builder.ID != attest.BuilderHost {
		t.Errorf("builder.id = %q, want host builder", p.RunDetails.Builder.ID)
	}
	run.Images[0].Digest = "latest"
	if _, err := attest.ProvenanceStatement(run); err == nil || !strings.Contains(err.Error(), "images[0] (cuda)") {
		t.Errorf("err = %v, want images[0] error", err)
	}
}

func TestParseStatementRejects(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"not json":          `{`,
		"wrong type":        `{"_type":"https://example.com/x","subject":[{"name":"a","digest":{"sha256":"00"}}],"predicateType":"p","predicate":{}}`,
		"no subject":        `{"_type":"https://in-toto.io/Statement/v1","subject":[],"predicateType":"p","predicate":{}}`,
		"no predicate type": `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a","digest":{"sha256":"00"}}],"predicate":{}}`,
	} {
		if _, err := attest.ParseStatement([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func hexOf(c byte) string { return attesttest.Hex(c) }

func TestCheckPredicate(t *testing.T) {
	t.Parallel()
	st, err := attest.ValidationStatement(attesttest.Run(false, hexOf('c')))
	if err != nil {
		t.Fatal(err)
	}
	if err := attest.CheckPredicate(st.PredicateType, st.Predicate); err != nil {
		t.Fatalf("valid predicate rejected: %v", err)
	}
	bad := bytes.Replace(st.Predicate, []byte(`"result":"passed"`), []byte(`"result":"maybe"`), 1)
	if err := attest.CheckPredicate(st.PredicateType, bad); err == nil || !strings.Contains(err.Error(), "result") {
		t.Errorf("bad result accepted: %v", err)
	}
	// Nil lists from the engine become empty arrays, never null.
	run := attesttest.Run(false, hexOf('c'))
	run.Build = &attest.BuildFacts{Artifacts: []attest.BuildArtifact{{Step: "b", Path: "k.fatbin", SHA256: hexOf('c')}}}
	run.Benchmarks, run.Results, run.Preflight = nil, nil, nil
	st, err = attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	if err := attest.CheckPredicate(st.PredicateType, st.Predicate); err != nil {
		t.Errorf("predicate from nil lists rejected: %v\n%s", err, st.Predicate)
	}
	if err := attest.CheckPredicate("https://example.com/other", json.RawMessage(`{"x":1}`)); err != nil {
		t.Errorf("other predicate type checked: %v", err)
	}
}

// TestParseStatementStrict: the parser sign and verify share refuses what
// another reader could take differently, and says where.
func TestParseStatementStrict(t *testing.T) {
	t.Parallel()
	const subj = `[{"name":"a","digest":{"sha256":"` + "0000000000000000000000000000000000000000000000000000000000000000" + `"}}]`
	st := func(fields string) string {
		return `{"_type":"https://in-toto.io/Statement/v1","subject":` + subj + `,"predicateType":"p",` + fields + `}`
	}
	tests := []struct {
		name, in string
		wantErr  []string // nil: accepted
	}{
		{name: "valid", in: st(`"predicate":{"a":1}`)},
		{name: "v0.1", in: strings.Replace(st(`"predicate":{}`), "Statement/v1", "Statement/v0.1", 1)},
		{name: "subject with uri and annotations", in: strings.Replace(st(`"predicate":{}`), `"name":"a"`, `"name":"a","uri":"https://x","annotations":{"k":"v"},"mediaType":"t"`, 1)},
		{name: "unknown field", in: st(`"predicate":{},"extra":1`), wantErr: []string{"invalid in-toto statement: extra: unknown field"}},
		{name: "case variant", in: strings.Replace(st(`"predicate":{}`), `"predicateType"`, `"PredicateType"`, 1),
			wantErr: []string{"PredicateType: unknown field", `hint: in-toto spells it "predicateType"`, "predicateType: missing"}},
		{name: "proto field name", in: strings.Replace(st(`"predicate":{}`), `"predicateType"`, `"predicate_type"`, 1),
			wantErr: []string{"predicate_type: unknown field", `in-toto spells it "predicateType"`}},
		{name: "subject field case variant", in: strings.Replace(st(`"predicate":{}`), `"digest"`, `"Digest"`, 1),
			wantErr: []string{"subject[0].Digest: unknown field", `in-toto spells it "digest"`}},
		{name: "duplicate key in the predicate", in: st(`"predicate":{"result":"failed","result":"passed"}`),
			wantErr: []string{`predicate: key "result" appears twice`}},
		{name: "duplicate subject", in: `{"_type":"https://in-toto.io/Statement/v1","subject":` + subj + `,"subject":[],"predicateType":"p","predicate":{}}`,
			wantErr: []string{`key "subject" appears twice`}},
		{name: "digest not strings", in: strings.Replace(st(`"predicate":{}`), `{"sha256":"`, `{"n":1,"sha256":"`, 1),
			wantErr: []string{"subject[0].digest: expected an object of strings"}},
		{name: "predicate not an object", in: st(`"predicate":[1]`), wantErr: []string{"predicate: expected a JSON object"}},
		{name: "predicate too deep", in: st(`"predicate":{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`),
			wantErr: []string{"nesting deeper than 64 levels"}},
		{name: "bad digest", in: strings.Replace(st(`"predicate":{}`), "000000000000", "zzzzzzzzzzzz", 1), wantErr: []string{"invalid in-toto statement"}},
		{name: "no subject", in: `{"_type":"https://in-toto.io/Statement/v1","predicateType":"p","predicate":{}}`, wantErr: []string{"subject: missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := attest.ParseStatement([]byte(tt.in))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
