package attest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
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
// Each speaks for the whole run as well as for its step: it is PASSED
// only when the run passed, on hardware that was not simulated (see
// TestResultPredicates).
type TestResultPredicate struct {
	// Result is FAILED when the step or the run did not pass, WARNED
	// when they passed but a case warned or the hardware was simulated,
	// else PASSED.
	Result string `json:"result"`
	// Configuration names, by digest, what the step was run from and
	// judged on: the pipeline file, the step's results files and the
	// hardware record (annotated gpuattest.simulated: "true" when it was
	// simulated).
	Configuration []ResourceDescriptor `json:"configuration"`
	// URL links to the run (a CI job), when the run had one.
	URL string `json:"url,omitempty"`
	// PassedTests, WarnedTests and FailedTests are the step's case names
	// by outcome (a burn-in's one test is the step itself). FailedTests
	// also names what else in the run did not pass: other steps by id,
	// failed preflight checks as preflight/CHECK, a run that failed for
	// no step's reason as run/error. On simulated hardware the cases that
	// passed are warned, not passed.
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

// SimulatedAnnotation is the annotation of a test-result statement's
// hardware configuration entry whose value is "true" when the hardware
// was simulated (GPUATTEST_FAKE_GPU).
const SimulatedAnnotation = "gpuattest.simulated"

// RunErrorTest is the name failedTests gives a run that did not pass for
// a reason no step or preflight check names (it was interrupted, or its
// hardware could not be captured). Step ids hold no "/", so it names no
// step.
const RunErrorTest = "run/error"

// TestResultPredicates builds one test-result predicate per test,
// benchmark and burn-in step of run, in pipeline order, keyed by step id
// in the order returned.
//
// A predicate speaks for its step and for the run it was judged in, so
// that a gate reading any one of them, or only their result, can never
// pass a release the validation statement fails:
//   - when the run did not pass (a step of any kind failed, errored or
//     was skipped, a preflight check failed, the run ended in an error),
//     every predicate is FAILED and its failedTests names what failed
//     (other steps by id, preflight/CHECK, RunErrorTest);
//   - when any hardware was simulated, none is better than WARNED: the
//     cases that passed are listed in warnedTests, and the hardware
//     configuration entry carries SimulatedAnnotation.
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
	simulated := runSimulated(run)
	if simulated {
		hw.Annotations[SimulatedAnnotation] = "true"
	}
	runFailed := runFailures(run)
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
				Annotations: resultAnnotations(run, r)})
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
		stepFailed := !slices.Contains(passingVerdicts, s.Verdict)
		if stepFailed && len(p.FailedTests) == 0 {
			// The step failed without a failed case (it did not run, or
			// its gate failed): the step is the test.
			p.FailedTests = append(p.FailedTests, s.ID)
			p.PassedTests = slices.DeleteFunc(p.PassedTests, func(n string) bool { return n == s.ID })
		}
		for _, f := range runFailed {
			if f != s.ID && !slices.Contains(p.FailedTests, f) {
				p.FailedTests = append(p.FailedTests, f)
			}
		}
		if simulated {
			// Passed on hardware that was not there: a warning.
			p.WarnedTests = append(p.WarnedTests, p.PassedTests...)
			p.PassedTests = []string{}
		}
		switch {
		case stepFailed || len(p.FailedTests) > 0:
			p.Result = TestResultFailed
		case simulated || len(p.WarnedTests) > 0:
			p.Result = TestResultWarned
		default:
			p.Result = TestResultPassed
		}
		ids = append(ids, s.ID)
		out = append(out, p)
	}
	return ids, out, nil
}

// runSimulated reports whether any hardware of run was simulated: the
// record's GPUs or a device a step ran on.
func runSimulated(run *Run) bool {
	if run.Hardware != nil && run.Hardware.Simulated {
		return true
	}
	for _, s := range run.Steps {
		for _, d := range s.Devices {
			if d.Simulated {
				return true
			}
		}
	}
	return false
}

// runFailures names what kept run from passing, as the validation
// predicate's failed_steps does (step ids, preflight/CHECK), and
// RunErrorTest when the run did not pass for a reason none of them
// names. Empty when the run passed.
func runFailures(run *Run) []string {
	var out []string
	for _, s := range run.Steps {
		if !slices.Contains(passingVerdicts, s.Verdict) {
			out = append(out, s.ID)
		}
	}
	for _, c := range run.Preflight {
		if n := "preflight/" + c.Check; c.Status == "failed" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if run.RunError != "" && len(out) == 0 {
		out = append(out, RunErrorTest)
	}
	return out
}

// TestResultStatements builds the run's test-result statements, one per
// test, benchmark and burn-in step, over the same subjects as the
// validation statement; see TestResultPredicates for what their result
// says about the run.
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

// resultAnnotations are a result file's annotations in a test-result
// statement's configuration: its role, and for a coverage report its
// format and totals (gpuattest.coverage.*).
func resultAnnotations(run *Run, r FileDigest) map[string]string {
	a := map[string]string{roleAnnotation: roleResults}
	if run.Coverage == nil || r.Kind != "coverage" {
		return a
	}
	for _, f := range run.Coverage.Files {
		if f.Path != r.Path || f.SHA256 != r.SHA256 {
			continue
		}
		a["gpuattest.coverage.format"] = f.Format
		a["gpuattest.coverage.lines"] = strconv.FormatFloat(f.Lines, 'f', 4, 64)
		a["gpuattest.coverage.lines_found"] = strconv.FormatInt(f.LinesFound, 10)
		a["gpuattest.coverage.lines_hit"] = strconv.FormatInt(f.LinesHit, 10)
		if f.Branches != nil {
			a["gpuattest.coverage.branches"] = strconv.FormatFloat(*f.Branches, 'f', 4, 64)
		}
		break
	}
	return a
}
