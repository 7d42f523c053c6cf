package policy_test

import (
	"os"
	"testing"

	"github.com/gpuattest/gpuattest/attest/policy"
)

// FuzzParse: any policy text is parsed, compiled and evaluated without a
// panic; a policy that parses evaluates to one result per rule.
func FuzzParse(f *testing.F) {
	ex, err := os.ReadFile("testdata/release-policy.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ex)
	f.Add([]byte(header + "rules:\n  - name: a\n    expr: predicate.x.y[0] > 1\n"))
	f.Add([]byte(header + "rules:\n  - {name: a, expr: 'size(subjects) == 1'}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := policy.Parse("fuzz.yaml", src)
		if err != nil {
			return
		}
		prog, err := p.Compile()
		if err != nil {
			t.Fatalf("Parse accepted a policy Compile rejects: %v", err)
		}
		res, err := prog.Evaluate(t.Context(), policy.Input{
			PredicateType: "t",
			Predicate:     []byte(`{"result":"passed","x":{"y":[2]},"steps":[],"hardware":{"gpus":[]},"benchmarks":[],"build":{"artifacts":[]},"simulated":false}`),
			Subjects:      []byte(`[{"name":"a","digest":{"sha256":"00"}}]`),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(p.Rules) {
			t.Fatalf("%d results for %d rules", len(res), len(p.Rules))
		}
	})
}
