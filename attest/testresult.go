package attest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// TestResultPredicateType is the predicate type URI of in-toto's test
// result predicate, version 0.1, which generic policy engines (Conforma,
// Kyverno, AMPEL) read without a plugin.
const TestResultPredicateType = "https://in-toto.io/attestation/test-result/v0.1"

// Results of TestResultPredicate.Result, as the spec spells them.
const (
	TestResultPassed = "PASSED"
	TestResultWarned = "WARNED"
	TestResultFailed = "FAILED"
)

// TestResultPredicate is in-toto's test-result v0.1 predicate, with the
// spec's field names: one per test, benchmark or burn-in step of a run.
type TestResultPredicate struct {
	// Result is PASSED, WARNED (the step passed, some cases warned) or
	// FAILED (the step did not pass, or did not run).
	Result string `json:"result"`
	// Configuration names, by digest, what the step was run from and
	// judged on: the pipeline file, the step's results files and the
	// hardware record.
	Configuration []ResourceDescriptor `json:"configuration"`
	// URL links to the run (a CI job), when the run had one.
	URL string `json:"url,omitempty"`
	// PassedTests, WarnedTests and FailedTests are the step's case names
	// by outcome (a burn-in's one test is the step itself).
	PassedTests []string `json:"passedTests"`
	WarnedTests []string `json:"warnedTests"`
	FailedTests []string `json:"failedTests"`
}

// SuiteCases are the case names of one test, benchmark or burn-in step,
// by outcome, for its test-result statement.
type SuiteCases struct {
	// Step is the step's id.
	Step string
	// Passed, Warned and Failed name the cases (failed includes errored).
	// Skipped cases are warned: they ran nothing.
	Passed, Warned, Failed []string
}

// suiteKinds are the step kinds that get a test-result statement.
var suiteKinds = []string{"test", "benchmark", "burnin"}

// Configuration roles (ResourceDescriptor annotation gpuattest.role).
const (
	roleAnnotation = "gpuattest.role"
	rolePipeline   = "pipeline"
	roleResults    = "results"
	roleHardware   = "hardware"
)

// TestResultPredicates builds one test-result predicate per test,
// benchmark and burn-in step of run, in pipeline order, keyed by step id
// in the order returned.
func TestResultPredicates(run *Run) ([]string, []*TestResultPredicate, error) {
	if run == nil {
		return nil, nil, errors.New("nil run")
	}
	var errs []error
	if !prefixSHA256.MatchString(run.PipelineDigest) {
		errs = append(errs, fmt.Errorf("pipeline_digest %q: expected sha256:<64 hex digits>", run.PipelineDigest))
	}
	if run.Hardware == nil || !prefixSHA256.MatchString(run.Hardware.Digest) {
		errs = append(errs, errors.New("hardware: the run has no sealed hardware record\nhint: the engine must capture one (pipeline/gpu) even when there is no GPU"))
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	base := []ResourceDescriptor{{
		Name:        run.PipelinePath,
		Digest:      map[string]string{"sha256": strings.TrimPrefix(run.PipelineDigest, "sha256:")},
		MediaType:   "application/yaml",
		Annotations: map[string]string{roleAnnotation: rolePipeline},
	}}
	hw := ResourceDescriptor{
		Name:        "hardware.json",
		Digest:      map[string]string{"sha256": strings.TrimPrefix(run.Hardware.Digest, "sha256:")},
		MediaType:   "application/json",
		Annotations: map[string]string{roleAnnotation: roleHardware, "gpuattest.digest": "RFC 8785 canonical JSON without volatile fields"},
	}
	var ids []string
	var out []*TestResultPredicate
	for _, s := range run.Steps {
		if !slices.Contains(suiteKinds, s.Kind) {
			continue
		}
		p := &TestResultPredicate{Configuration: slices.Clone(base), URL: run.URL,
			PassedTests: []string{}, WarnedTests: []string{}, FailedTests: []string{}}
		for _, r := range run.Results {
			if r.Step != s.ID {
				continue
			}
			if !hexSHA256.MatchString(r.SHA256) {
				return nil, nil, fmt.Errorf("results of step %s: %s sha256 %q: expected 64 lowercase hex digits", s.ID, r.Path, r.SHA256)
			}
			p.Configuration = append(p.Configuration, ResourceDescriptor{Name: r.Path, Digest: map[string]string{"sha256": r.SHA256},
				Annotations: map[string]string{roleAnnotation: roleResults}})
		}
		p.Configuration = append(p.Configuration, hw)
		for _, c := range run.Suites {
			if c.Step == s.ID {
				p.PassedTests = append(p.PassedTests, c.Passed...)
				p.WarnedTests = append(p.WarnedTests, c.Warned...)
				p.FailedTests = append(p.FailedTests, c.Failed...)
			}
		}
		failed := make(map[string]bool, len(p.FailedTests))
		for _, f := range p.FailedTests {
			failed[f] = true
		}
		for _, f := range s.FailedCases {
			if !failed[f] {
				failed[f] = true
				p.FailedTests = append(p.FailedTests, f)
			}
		}
		switch {
		case !slices.Contains(passingVerdicts, s.Verdict):
			p.Result = TestResultFailed
			if len(p.FailedTests) == 0 {
				// The step failed without a failed case (it did not
				// run, or its gate failed): the step is the test.
				p.FailedTests = append(p.FailedTests, s.ID)
				p.PassedTests = slices.DeleteFunc(p.PassedTests, func(n string) bool { return n == s.ID })
			}
		case len(p.FailedTests) > 0:
			p.Result = TestResultFailed
		case len(p.WarnedTests) > 0:
			p.Result = TestResultWarned
		default:
			p.Result = TestResultPassed
		}
		ids = append(ids, s.ID)
		out = append(out, p)
	}
	return ids, out, nil
}

// TestResultStatements builds the run's test-result statements, one per
// test, benchmark and burn-in step, over the same subjects as the
// validation statement.
func TestResultStatements(run *Run) ([]*Statement, error) {
	ids, preds, err := TestResultPredicates(run)
	if err != nil {
		return nil, fmt.Errorf("building test-result predicates: %w", err)
	}
	out := make([]*Statement, 0, len(preds))
	for i, p := range preds {
		st, err := newStatement(run.Artifacts, TestResultPredicateType, p)
		if err != nil {
			return nil, fmt.Errorf("test-result statement of step %s: %w", ids[i], err)
		}
		out = append(out, st)
	}
	return out, nil
}
