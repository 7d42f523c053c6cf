package collect

import (
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// suiteCases records the case names of a test, benchmark or burn-in step
// by outcome, for its test-result statement: a test's from its results
// copy in the step directory (the details name only failed and skipped
// cases), a benchmark's from its details (a case an enforced gate or
// reference found SLOWER or MISSING failed, one found AMBIGUOUS or
// SLOWER unenforced warned), a burn-in's as the step itself.
func (c *collector) suiteCases(s *pipeline.Step, sr *rundir.Step) error {
	sc := attest.SuiteCases{Step: s.ID}
	switch {
	case sr.Test != nil:
		cases, err := c.testCases(s, sr)
		if err != nil && sr.State == runtypes.Passed {
			return err
		}
		if err != nil {
			// A failed step's results may be gone or unreadable: its
			// details still name the failed cases.
			cases = append(sr.Test.Failures[:0:0], sr.Test.Failures...)
		}
		for _, tc := range cases {
			switch tc.Status {
			case suite.StatusPassed:
				sc.Passed = append(sc.Passed, tc.Name)
			case suite.StatusSkipped:
				sc.Warned = append(sc.Warned, tc.Name)
			default:
				sc.Failed = append(sc.Failed, tc.Name)
			}
		}
	case sr.Benchmark != nil:
		d := sr.Benchmark
		for _, bc := range d.Cases {
			switch {
			case bc.Status == suite.StatusFailed || bc.Status == suite.StatusError:
				sc.Failed = append(sc.Failed, bc.Name)
			case bc.Status == suite.StatusSkipped:
				sc.Warned = append(sc.Warned, bc.Name)
			default:
				switch verdictOf(d, bc.Name) {
				case "fail":
					sc.Failed = append(sc.Failed, bc.Name)
				case "warn":
					sc.Warned = append(sc.Warned, bc.Name)
				default:
					sc.Passed = append(sc.Passed, bc.Name)
				}
			}
		}
	case sr.Burnin != nil:
		if sr.State == runtypes.Passed {
			sc.Passed = []string{s.ID}
		} else {
			sc.Failed = []string{s.ID}
		}
	default:
		return nil
	}
	c.run.Suites = append(c.run.Suites, sc)
	return nil
}

// verdictOf says whether benchmark case name's comparisons fail it (an
// enforced SLOWER or MISSING, an enforced AMBIGUOUS under
// gate.onAmbiguous: fail), warn (AMBIGUOUS otherwise, or SLOWER
// unenforced) or neither ("").
func verdictOf(d *suite.BenchmarkDetails, name string) string {
	out := ""
	check := func(rep *suite.Report, enforced bool) {
		if rep == nil {
			return
		}
		for _, cc := range rep.Cases {
			if cc.Name != name {
				continue
			}
			switch v := string(cc.Verdict); {
			case enforced && (v == "SLOWER" || v == "MISSING"):
				out = "fail"
			case enforced && v == "AMBIGUOUS" && rep.OnAmbiguous == pipeline.OnAmbiguousFail:
				out = "fail"
			case v == "SLOWER" || v == "AMBIGUOUS":
				if out == "" {
					out = "warn"
				}
			}
		}
	}
	if d.Reference != nil {
		check(d.Reference.Report, true)
	}
	if d.Gate != nil {
		check(d.Gate.Report, d.Gate.Enforced)
	}
	return out
}

// testCases reads a test step's cases from its results copy in the step
// directory (results<ext>), whose digest run.json records.
func (c *collector) testCases(s *pipeline.Step, sr *rundir.Step) ([]suite.CaseStatus, error) {
	if len(sr.Results) == 0 {
		return nil, nil
	}
	f := sr.Results[0]
	name := "results" + filepath.Ext(f.Path)
	if rest, ok := strings.CutPrefix(f.Path, "steps/"+s.ID+"/"); ok {
		name = rest
	}
	p := runlayout.StepFile(c.dir, s.ID, name)
	r, err := suite.ReadResultsFormat(p, sr.Test.Format)
	if err != nil {
		return nil, fmt.Errorf("step %s: reading its cases for the test-result statement: %w", s.ID, err)
	}
	out := make([]suite.CaseStatus, 0, len(r.Cases))
	for _, tc := range r.Cases {
		out = append(out, suite.CaseStatus{Name: tc.Name, Status: tc.Status})
	}
	return out, nil
}
