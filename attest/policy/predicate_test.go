package policy

import "testing"

// TestCoverageOfFieldErrors: a field of the wrong type is an error naming
// its path; the first one counts.
func TestCoverageOfFieldErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pred, want string }{
		{`{"result": 1}`, "result: expected a string"},
		{`{"build": []}`, "build: expected an object"},
		{`{"build": {"targets": "sm_90"}}`, "build.targets: expected an array"},
		{`{"build": {"targets": ["sm_90", 7]}}`, "build.targets[1]: expected a string"},
		{`{"steps": {}}`, "steps: expected an array"},
		{`{"steps": [{}, 3]}`, "steps[1]: expected an object"},
		{`{"steps": [{"id": "a"}, {"kind": false}]}`, "steps[1].kind: expected a string"},
		{`{"steps": [{"devices": [{}, {"uuid": "u", "simulated": "yes"}]}]}`, "steps[0].devices[1].simulated: expected true or false"},
		{`{"steps": [{"devices": [{"compute_capability": 9.0}]}, {"id": 1}]}`, "steps[0].devices[0].compute_capability: expected a string"},
	} {
		p, err := DecodePredicate([]byte(tc.pred))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := coverageOf(p.tree); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %s", tc.pred, err, tc.want)
		}
	}
}
