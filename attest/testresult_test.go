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
// follows the step's verdict and its cases, and never reads PASSED for a
// run that did not pass (any step, exec steps included, preflight, a run
// error) or that ran on simulated hardware (issue 30, items 3 and 4).
func TestTestResultStatements(t *testing.T) {
	t.Parallel()
	type want struct {
		result                 string
		passed, warned, failed []string
	}
	tests := []struct {
		name          string
		simulated     bool
		edit          func(*attest.Run)
		want          map[string]want
		wantSimulated bool
		wantErr       string
	}{
		{name: "passed", edit: func(r *attest.Run) {
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a", "b"}}, {Step: "bench", Passed: []string{"k"}}}
		}, want: map[string]want{"test": {"PASSED", []string{"a", "b"}, nil, nil}, "bench": {"PASSED", []string{"k"}, nil, nil}}},
		{name: "skipped case warns", edit: func(r *attest.Run) {
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a"}, Warned: []string{"b"}}}
		}, want: map[string]want{"test": {"WARNED", []string{"a"}, []string{"b"}, nil}, "bench": {"PASSED", nil, nil, nil}}},
		{name: "failed case fails every statement of the run", edit: func(r *attest.Run) {
			r.Steps[1].Verdict = "failed"
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a"}, Failed: []string{"b"}}, {Step: "bench", Passed: []string{"k"}}}
		}, want: map[string]want{"test": {"FAILED", []string{"a"}, nil, []string{"b"}}, "bench": {"FAILED", []string{"k"}, nil, []string{"test"}}}},
		{name: "step skipped names itself", edit: func(r *attest.Run) { r.Steps[2].Verdict = "skipped" },
			want: map[string]want{"test": {"FAILED", nil, nil, []string{"bench"}}, "bench": {"FAILED", nil, nil, []string{"bench"}}}},
		{name: "failed exec step", edit: func(r *attest.Run) {
			r.Steps = append(r.Steps, attest.StepVerdict{ID: "memcheck", Kind: "exec", Verdict: "failed", Runner: "host"})
			r.RunError = "run failed: step memcheck failed"
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a", "b"}}, {Step: "bench", Passed: []string{"k"}}}
		}, want: map[string]want{"test": {"FAILED", []string{"a", "b"}, nil, []string{"memcheck"}}, "bench": {"FAILED", []string{"k"}, nil, []string{"memcheck"}}}},
		{name: "failed preflight", edit: func(r *attest.Run) {
			r.Preflight = []attest.PreflightCheck{{Step: "bench", Check: "ecc", Status: "failed"}, {Check: "driver", Status: "passed"}}
		}, want: map[string]want{"test": {"FAILED", nil, nil, []string{"preflight/ecc"}}, "bench": {"FAILED", nil, nil, []string{"preflight/ecc"}}}},
		{name: "run error", edit: func(r *attest.Run) { r.RunError = "run interrupted: context canceled" },
			want: map[string]want{"test": {"FAILED", nil, nil, []string{"run/error"}}, "bench": {"FAILED", nil, nil, []string{"run/error"}}}},
		{name: "simulated hardware warns", simulated: true, edit: func(r *attest.Run) {
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a", "b"}}, {Step: "bench", Passed: []string{"k"}}}
		}, wantSimulated: true, want: map[string]want{"test": {"WARNED", nil, []string{"a", "b"}, nil}, "bench": {"WARNED", nil, []string{"k"}, nil}}},
		{name: "a simulated device warns", edit: func(r *attest.Run) {
			r.Steps[2].Devices[0].Simulated = true
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a"}}}
		}, wantSimulated: true, want: map[string]want{"test": {"WARNED", nil, []string{"a"}, nil}, "bench": {"WARNED", nil, nil, nil}}},
		{name: "simulated and failed", simulated: true, edit: func(r *attest.Run) {
			r.Steps[2].Verdict = "failed"
			r.Suites = []attest.SuiteCases{{Step: "test", Passed: []string{"a"}}, {Step: "bench", Failed: []string{"k"}}}
		}, wantSimulated: true, want: map[string]want{"test": {"FAILED", nil, []string{"a"}, []string{"bench"}}, "bench": {"FAILED", nil, nil, []string{"k"}}}},
		{name: "no hardware", edit: func(r *attest.Run) { r.Hardware = nil }, wantErr: "no sealed hardware record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := attesttest.Run(tt.simulated, hexOf('c'))
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
					if c.Annotations["gpuattest.role"] == "hardware" && (c.Annotations[attest.SimulatedAnnotation] == "true") != tt.wantSimulated {
						t.Errorf("hardware configuration annotations %v: want %s true: %v", c.Annotations, attest.SimulatedAnnotation, tt.wantSimulated)
					}
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

// TestTestResultCoverage: a test step's coverage report is in its
// statement's configuration by digest, annotated with its totals, and
// the validation predicate carries the run's totals (issue 34).
func TestTestResultCoverage(t *testing.T) {
	t.Parallel()
	run := attesttest.Run(false, hexOf('c'))
	half := 0.5
	cov := attest.CoverageFile{Step: "test", Path: "steps/test/coverage-0.info", SHA256: hexOf('e'), Format: "lcov",
		CoverageTotals: attest.CoverageTotals{Lines: 0.8, LinesFound: 5, LinesHit: 4, Branches: &half, BranchesFound: 2, BranchesHit: 1}}
	run.Results = append(run.Results, attest.FileDigest{Path: cov.Path, SHA256: cov.SHA256, Step: "test", Kind: "coverage"})
	run.Coverage = &attest.CoverageFacts{CoverageTotals: cov.CoverageTotals, Files: []attest.CoverageFile{cov}}
	sts, err := attest.TestResultStatements(run)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, st := range sts {
		var p attest.TestResultPredicate
		if err := json.Unmarshal(st.Predicate, &p); err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Configuration {
			if c.Name != cov.Path {
				continue
			}
			found = true
			want := map[string]string{"gpuattest.role": "results", "gpuattest.coverage.format": "lcov", "gpuattest.coverage.lines": "0.8000",
				"gpuattest.coverage.lines_found": "5", "gpuattest.coverage.lines_hit": "4", "gpuattest.coverage.branches": "0.5000"}
			if diff := cmp.Diff(want, c.Annotations); diff != "" || c.Digest["sha256"] != cov.SHA256 {
				t.Errorf("coverage configuration entry (-want +got):\n%s digest %v", diff, c.Digest)
			}
		}
	}
	if !found {
		t.Fatal("no test-result statement names the coverage report")
	}
	val, err := attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	var vp attest.ValidationPredicate
	if err := json.Unmarshal(val.Predicate, &vp); err != nil {
		t.Fatal(err)
	}
	if vp.Coverage == nil || vp.Coverage.LinesHit != 4 || len(vp.Coverage.Files) != 1 {
		t.Fatalf("validation predicate coverage = %+v", vp.Coverage)
	}
}
