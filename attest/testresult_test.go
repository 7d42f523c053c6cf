package attest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
)

// TestTestResultStatements: one statement per test, benchmark and
// burn-in step, over the validation statement's subjects; the result
// follows the step's verdict and its cases.
func TestTestResultStatements(t *testing.T) {
	t.Parallel()
	type want struct {
		result                 string
		passed, warned, failed []string
	}
	tests := []struct {
		name    string
		edit    func(*attest.Run)
		want    map[string]want
		wantErr string
	}{
		{name: "passed", edit: func(r *attest.Run) {
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a", "b"}}, {Step: "bench", Passed: []string{"k"}}}
		}, want: map[string]want{"test": {"PASSED", []string{"a", "b"}, nil, nil}, "bench": {"PASSED", []string{"k"}, nil, nil}}},
		{name: "skipped case warns", edit: func(r *attest.Run) {
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a"}, Warned: []string{"b"}}}
		}, want: map[string]want{"test": {"WARNED", []string{"a"}, []string{"b"}, nil}, "bench": {"PASSED", nil, nil, nil}}},
		{name: "failed case", edit: func(r *attest.Run) {
			r.Steps[1].Verdict = "failed"
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a"}, Failed: []string{"b"}}}
		}, want: map[string]want{"test": {"FAILED", []string{"a"}, nil, []string{"b"}}, "bench": {"PASSED", nil, nil, nil}}},
		{name: "step skipped names itself", edit: func(r *attest.Run) { r.Steps[2].Verdict = "skipped" },
			want: map[string]want{"test": {"PASSED", nil, nil, nil}, "bench": {"FAILED", nil, nil, []string{"bench"}}}},
		{name: "no hardware", edit: func(r *attest.Run) { r.Hardware = nil }, wantErr: "no sealed hardware record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := attesttest.Run(true, hexOf('c'))
			tt.edit(run)
			sts, err := attest.TestResultStatements(run)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			val, err := attest.ValidationStatement(run)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]want{}
			for _, st := range sts {
				if st.PredicateType != attest.TestResultPredicateType {
					t.Errorf("predicate type %s", st.PredicateType)
				}
				if diff := cmp.Diff(val.Subject, st.Subject); diff != "" {
					t.Errorf("subjects (-validation +test-result):\n%s", diff)
				}
				var p attest.TestResultPredicate
				if err := json.Unmarshal(st.Predicate, &p); err != nil {
					t.Fatal(err)
				}
				roles := map[string]string{}
				for _, c := range p.Configuration {
					roles[c.Annotations["gpuattest.role"]] = c.Name + "@" + c.Digest["sha256"]
				}
				if roles["pipeline"] == "" || roles["hardware"] != "hardware.json@"+strings.TrimPrefix(run.Hardware.Digest, "sha256:") {
					t.Errorf("configuration %v: want the pipeline and the hardware record by digest", roles)
				}
				// The step is the one whose results it names, or, for the
				// benchmark of this fixture (no results), the other.
				id := "bench"
				if strings.Contains(roles["results"], "steps/test/") {
					id = "test"
				}
				got[id] = want{p.Result, nilIfEmpty(p.PassedTests), nilIfEmpty(p.WarnedTests), nilIfEmpty(p.FailedTests)}
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
