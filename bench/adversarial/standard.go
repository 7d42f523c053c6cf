package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
)

// standardCases (issue 30, items 3 and 4): the in-toto test-result
// statements a generic gate (Conforma, Kyverno) reads never say PASSED
// for a run that did not pass or ran on simulated hardware. Each case
// signs a real run (a CUDA build and a test step) and verifies its
// bundles with --predicate-type test-result and
// docs/examples/test-result-policy.yaml: a run whose exec step failed,
// a run whose second test step failed, and a passed run on
// GPUATTEST_FAKE_GPU (with and without --allow-simulated) are refused
// with exit 12, and none of their statements says PASSED; the same
// pipeline, passed on this machine's real (GPU-less) hardware, verifies.
func standardCases(ctx context.Context, l *lab) ([]result, error) {
	dir := filepath.Join(l.dir, "standard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	policy, err := moduleFile("docs/examples/test-result-policy.yaml")
	if err != nil {
		return nil, err
	}
	key, err := l.keyPair(ctx, dir, "rel")
	if err != nil {
		return nil, err
	}
	s := &standardLab{lab: l, dir: dir, key: key, policy: policy}
	cases := []struct {
		name     string
		steps    string
		env      []string
		runExit  int
		verify   []string
		wantExit int
		check    func([]attest.TestResultPredicate) string
	}{
		{name: "test-result: a passed run on real hardware verifies (control)", steps: passingTest, wantExit: 0,
			check: allResults(attest.TestResultPassed)},
		{name: "test-result: a run whose exec step failed is refused, though its test step passed", runExit: 1,
			steps: passingTest + "  - id: memcheck\n    needs: [build]\n    run: exit 1\n", wantExit: 12,
			check: allResults(attest.TestResultFailed, "memcheck")},
		{name: "test-result: a run whose other test step failed is refused by the passing step's statement too", runExit: 1,
			steps: passingTest + failingTest, wantExit: 12, check: allResults(attest.TestResultFailed, "flaky", "scale/n=7")},
		{name: "test-result: a passed run on a simulated GPU is refused without --allow-simulated", steps: passingTest,
			env: []string{"GPUATTEST_FAKE_GPU=h100"}, wantExit: 12, check: simulatedResults},
		{name: "test-result: a passed run on a simulated GPU is refused with --allow-simulated too", steps: passingTest,
			env: []string{"GPUATTEST_FAKE_GPU=h100"}, verify: []string{"--allow-simulated"}, wantExit: 12, check: simulatedResults},
	}
	var rs []result
	for i, c := range cases {
		r, err := s.signedVerify(ctx, i, c.steps, c.env, c.runExit, c.verify, c.wantExit, c.check)
		if err != nil {
			return nil, err
		}
		r.name = c.name
		rs = append(rs, r)
	}
	return rs, nil
}

// The standard category's test steps: results in gpuattest's format,
// backend cpu.
const (
	passingTest = "  - id: test\n    kind: test\n    needs: [build]\n    run: printf '{\"schema\":\"https://gpuattest.dev/results/v1\",\"tool\":\"t\",\"backend\":\"cpu\",\"cases\":[{\"name\":\"scale/n=1024\",\"status\":\"passed\"}]}' > r.json\n    results: r.json\n"
	failingTest = "  - id: flaky\n    kind: test\n    needs: [build]\n    run: printf '{\"schema\":\"https://gpuattest.dev/results/v1\",\"tool\":\"t\",\"backend\":\"cpu\",\"cases\":[{\"name\":\"scale/n=7\",\"status\":\"failed\"}]}' > f.json; exit 1\n    results: f.json\n"
)

// standardLab is the standard category's key and policy.
type standardLab struct {
	*lab
	dir, key, policy string
}

// signedVerify signs a run of a build followed by steps (wanting exit
// runExit), then verifies its bundles against the test-result policy
// (wanting exit wantExit), and checks their test-result predicates.
func (s *standardLab) signedVerify(ctx context.Context, i int, steps string, env []string, runExit int, verifyArgs []string, wantExit int,
	check func([]attest.TestResultPredicate) string) (result, error) {
	dir := filepath.Join(s.dir, fmt.Sprint(i))
	proj, err := project(dir, "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: standard\ntargets: [sm_80]\nsteps:\n"+
		"  - id: build\n    kind: cuda-build\n    sources: [k.cu]\n    reproducible: off\n"+steps)
	if err != nil {
		return result{}, err
	}
	runDir := filepath.Join(dir, "run")
	u, out, err := s.call(ctx, proj, append([]string{"GPUATTEST_PASSWORD="}, env...), "run", "p.yaml", "--out", runDir, "--key", s.key+".key", "-q")
	r := result{usage: u}
	if err != nil {
		return r, err
	}
	if r.right, r.why = exitIn(u, out, runExit); !r.right {
		r.why = "gpuattest run: " + r.why
		return r, nil
	}
	bundles := filepath.Join(runDir, "attestations.intoto.jsonl")
	fatbin, err := filepath.Glob(filepath.Join(runDir, "steps", "build", "outputs", "*", "*.fatbin"))
	if err != nil || len(fatbin) != 1 {
		r.right, r.why = false, fmt.Sprintf("the run's fatbin: %v %v%s", fatbin, err, tail(out))
		return r, nil
	}
	args := append([]string{"verify", "--bundle", bundles, "--key", s.key + ".pub", "--predicate-type", attest.TestResultPredicateType,
		"--policy", s.policy}, verifyArgs...)
	u, out, err = s.call(ctx, dir, nil, append(args, fatbin[0])...)
	r.usage = u
	if err != nil {
		return r, err
	}
	if r.right, r.why = exitIn(u, out, wantExit); !r.right {
		return r, nil
	}
	preds, err := testResults(bundles)
	switch {
	case err != nil:
		r.right, r.why = false, err.Error()
	case len(preds) == 0:
		r.right, r.why = false, "the run signed no test-result statement"
	default:
		if why := check(preds); why != "" {
			r.right, r.why = false, why
		}
	}
	return r, nil
}

// allResults checks that every predicate's result is want and, when
// failed names are given, that its failedTests name one of them (the
// failed step, or its own failed case).
func allResults(want string, failed ...string) func([]attest.TestResultPredicate) string {
	return func(ps []attest.TestResultPredicate) string {
		for _, p := range ps {
			named := len(failed) == 0 || slices.ContainsFunc(failed, func(f string) bool { return slices.Contains(p.FailedTests, f) })
			if p.Result != want || !named {
				return fmt.Sprintf("a statement says %s with failedTests %v: want %s naming one of %q", p.Result, p.FailedTests, want, failed)
			}
		}
		return ""
	}
}

// simulatedResults checks that every predicate says WARNED, has no passed
// test and names the simulated hardware.
func simulatedResults(ps []attest.TestResultPredicate) string {
	for _, p := range ps {
		sim := slices.ContainsFunc(p.Configuration, func(c attest.ResourceDescriptor) bool {
			return c.Name == "hardware.json" && c.Annotations[attest.SimulatedAnnotation] == "true"
		})
		if p.Result != attest.TestResultWarned || len(p.PassedTests) > 0 || !sim {
			return fmt.Sprintf("a statement says %s, passedTests %v, hardware annotated simulated: %v", p.Result, p.PassedTests, sim)
		}
	}
	return ""
}

// testResults decodes the test-result predicates of a JSONL file of
// bundles (verify checked their signatures).
func testResults(file string) ([]attest.TestResultPredicate, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []attest.TestResultPredicate
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		st, err := sign.UnverifiedStatement(sc.Bytes())
		if err != nil {
			return nil, err
		}
		if st.PredicateType != attest.TestResultPredicateType {
			continue
		}
		var p attest.TestResultPredicate
		if err := json.Unmarshal(st.Predicate, &p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

// moduleFile finds rel in the module this campaign is part of, from the
// working directory up (the campaign runs from the module root, its test
// from bench/adversarial).
func moduleFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New(rel + " not found above the working directory\nhint: run the campaign from the module root")
		}
		dir = up
	}
}
