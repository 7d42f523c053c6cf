package policy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const header = "apiVersion: gpuattest.dev/v1\nkind: Policy\n"

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		wantErr   []string
	}{
		{name: "unknown field", src: header + "rules:\n  - name: a\n    expr: 'true'\n    mesage: typo\n", wantErr: []string{"p.yaml:6:5: unknown field \"mesage\""}},
		{name: "bad header", src: "apiVersion: v2\nkind: Pipeline\nrules:\n  - name: a\n    expr: 'true'\n", wantErr: []string{`p.yaml:1:13: apiVersion: "v2": expected "gpuattest.dev/v1"`, `p.yaml:2:7: kind: "Pipeline": expected "Policy"`}},
		{name: "no rules", src: header + "rules: []\n", wantErr: []string{"rules: expected at least one rule"}},
		{name: "duplicate and empty", src: header + "rules:\n  - name: a\n    expr: 'true'\n  - name: a\n    expr: ''\n", wantErr: []string{`p.yaml:6:11: rules[1].name: "a": duplicate rule name`, "rules[1].expr: expected a CEL expression"}},
		{name: "compile error names the rule", src: header + "rules:\n  - name: typo\n    expr: predicate.x ==\n", wantErr: []string{`p.yaml:5:11: rule "typo": compiling expr`}},
		{name: "non-bool", src: header + "rules:\n  - name: num\n    expr: '1 + 2'\n", wantErr: []string{`rule "num": expr has type int: expected bool`}},
		{name: "yaml syntax", src: header + "rules:\n  - name: [\n", wantErr: []string{"p.yaml:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := policy.Parse("p.yaml", []byte(tt.src))
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

func TestEvaluate(t *testing.T) {
	t.Parallel()
	src := header + `rules:
  - name: passed
    expr: predicate.result == "passed"
  - name: sm_90
    expr: predicate.hardware.gpus.all(g, g.compute_capability == "9.0")
  - name: throughput
    expr: predicate.benchmarks.exists(b, b.throughput.value >= 2800)
    message: too slow
  - name: subject
    expr: subjects.exists(s, s.digest.sha256.startsWith("ab"))
  - name: type
    expr: predicateType.endsWith("/gpu-validation/v2")
  - name: missing field
    expr: predicate.nope == 1
  - name: dyn non-bool
    expr: predicate.result
`
	p, err := policy.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	pred := `{"result":"passed","hardware":{"gpus":[{"compute_capability":"9.0"},{"compute_capability":"8.0"}]},"benchmarks":[{"throughput":{"value":2950}}]}`
	got, err := prog.Evaluate(t.Context(), policy.Input{
		PredicateType: "https://gpuattest.dev/gpu-validation/v2",
		Predicate:     json.RawMessage(pred),
		Subjects:      json.RawMessage(`[{"name":"k","digest":{"sha256":"abcd"}}]`),
	})
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		Name     string
		Passed   bool
		HasError bool
	}
	var gotRes []res
	for _, r := range got {
		gotRes = append(gotRes, res{r.Name, r.Passed, r.Error != ""})
	}
	want := []res{
		{"passed", true, false},
		{"sm_90", false, false},
		{"throughput", true, false},
		{"subject", true, false},
		{"type", true, false},
		{"missing field", false, true},
		{"dyn non-bool", false, true},
	}
	if diff := cmp.Diff(want, gotRes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := prog.Evaluate(t.Context(), policy.Input{Predicate: json.RawMessage(`[1]`)}); err == nil {
		t.Error("non-object predicate accepted")
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	prog, err := policy.Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	const real = `"devices":[{"uuid":"GPU-1","name":"NVIDIA H100 80GB HBM3","compute_capability":"9.0","simulated":false}]`
	const sim = `"devices":[{"uuid":"GPU-1","name":"NVIDIA H100 80GB HBM3","compute_capability":"9.0","simulated":true}]`
	for _, tt := range []struct {
		pred string
		want []bool // all steps passed, hardware not simulated, gpu steps on real GPUs with cuda, no AMBIGUOUS enforced gate
	}{
		{`{"result":"passed","failed_steps":[],"steps":[{"kind":"test","verdict":"passed","gpu":true,"backend":"cuda",` + real + `},{"kind":"exec","verdict":"cached","gpu":false,"devices":[]}],"simulated":false}`, []bool{true, true, true, true}},
		{`{"result":"failed","failed_steps":["t"],"steps":[{"kind":"test","verdict":"failed","gpu":false,"backend":"cpu","devices":[]}],"simulated":false}`, []bool{false, true, true, true}},
		// a gpu: true test on the CPU backend, on a real GPU's machine
		{`{"result":"passed","failed_steps":[],"steps":[{"kind":"test","verdict":"passed","gpu":true,"backend":"cpu",` + real + `}],"simulated":false}`, []bool{true, true, false, true}},
		// a gpu: true step that saw no GPU
		{`{"result":"passed","failed_steps":[],"steps":[{"kind":"exec","verdict":"passed","gpu":true,"devices":[]}],"simulated":false}`, []bool{true, true, false, true}},
		// a gpu: true test whose results do not say the backend (JUnit)
		{`{"result":"passed","failed_steps":[],"steps":[{"kind":"test","verdict":"passed","gpu":true,` + real + `}],"simulated":false}`, []bool{true, true, false, true}},
		{`{"result":"passed","failed_steps":[],"steps":[{"kind":"test","verdict":"passed","gpu":true,"backend":"cpu",` + sim + `}],"simulated":true}`, []bool{true, false, false, true}},
		// an enforced gate that ended AMBIGUOUS (passed under
		// gate.onAmbiguous: warn) is refused; an unenforced one is not
		{`{"result":"passed","failed_steps":[],"steps":[{"kind":"benchmark","verdict":"passed","gpu":true,"backend":"cuda",` + real + `}],"simulated":false,` +
			`"benchmarks":[{"step":"b","case":"k","comparisons":[{"against":"reference","verdict":"AMBIGUOUS","enforced":true}]}]}`, []bool{true, true, true, false}},
		{`{"result":"passed","failed_steps":[],"steps":[{"kind":"benchmark","verdict":"passed","gpu":true,"backend":"cuda",` + real + `}],"simulated":false,` +
			`"benchmarks":[{"step":"b","case":"k","comparisons":[{"against":"baseline","verdict":"AMBIGUOUS","enforced":false},{"against":"reference","verdict":"SAME","enforced":true}]},{"step":"b","case":"j"}]}`, []bool{true, true, true, true}},
	} {
		got, err := prog.Evaluate(t.Context(), policy.Input{Predicate: json.RawMessage(tt.pred)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) {
			t.Fatalf("%d rules, want %d", len(got), len(tt.want))
		}
		for i, r := range got {
			if r.Passed != tt.want[i] {
				t.Errorf("%s: rule %q passed=%v, want %v (%s)", tt.pred, r.Name, r.Passed, tt.want[i], r.Error)
			}
		}
	}
}

func TestExamplePolicy(t *testing.T) {
	t.Parallel()
	p, err := policy.Load("testdata/release-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	pred := func(simulated bool, throughput float64, repro bool) json.RawMessage {
		b, _ := json.Marshal(map[string]any{
			"result":     "passed",
			"simulated":  simulated,
			"hardware":   map[string]any{"gpus": []any{map[string]any{"compute_capability": "9.0"}}},
			"steps":      []any{map[string]any{"id": "t", "kind": "test", "verdict": "passed"}},
			"benchmarks": []any{map[string]any{"case": "vector_add", "throughput": map[string]any{"value": throughput, "unit": "GB/s"}}},
			"build":      map[string]any{"reproducible": repro, "artifacts": []any{map[string]any{"sass_archs": []string{"sm_80", "sm_90"}}}},
		})
		return b
	}
	failing := func(in json.RawMessage) []string {
		res, err := prog.Evaluate(t.Context(), policy.Input{Predicate: in})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res {
			if !r.Passed {
				out = append(out, r.Name)
			}
		}
		return out
	}
	if got := failing(pred(false, 2950, true)); len(got) != 0 {
		t.Errorf("good run fails %v", got)
	}
	want := []string{"vector_add throughput >= 2800 GB/s", "build reproducible", "not simulated"}
	if diff := cmp.Diff(want, failing(pred(true, 2700, false))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestExamplePolicyMatchesSchema(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/release-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(src)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := jsonschema.NewCompiler().Compile("../../schemas/policy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string][]byte{
		"example":       js,
		"unknown field": []byte(`{"apiVersion":"gpuattest.dev/v1","kind":"Policy","rules":[{"name":"a","expr":"true","mesage":"x"}]}`),
		"no rules":      []byte(`{"apiVersion":"gpuattest.dev/v1","kind":"Policy","rules":[]}`),
	} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		err = sch.Validate(v)
		if (err == nil) != (name == "example") {
			t.Errorf("%s: schema validation error = %v", name, err)
		}
	}
}

// TestCompileOnce: Parse compiles the rules to check them, and Compile
// hands back that program instead of compiling them again; a policy
// whose rules changed compiles anew.
func TestCompileOnce(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("p.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: passed\n    expr: predicate.result == \"passed\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := p.Compile(); err != nil || again != first {
		t.Fatalf("second Compile: %p, %v; want the first program %p", again, err, first)
	}
	p.Rules = append(p.Rules, policy.Rule{Name: "bad", Expr: "predicate.result +"})
	if _, err := p.Compile(); err == nil || !strings.Contains(err.Error(), `rule "bad"`) {
		t.Fatalf("changed rules: %v; want the new rule compiled (and refused)", err)
	}
}

// TestGPUEvidenceRules: rules read the verifier's per-GPU verdicts, and
// a rule that requires evidence fails where the statement has none.
func TestGPUEvidenceRules(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("p.yaml", []byte(header+`rules:
  - name: every GPU device-signed under NVIDIA's root, measurements matched
    expr: size(gpuEvidence) > 0 && gpuEvidence.all(g, g.status == "matched" && g.device_signed && g.nvidia_root)
  - name: no GPU unattested
    expr: '!gpuEvidence.exists(g, g.status == "unattested")'
  - name: Hopper driver
    expr: gpuEvidence.all(g, g.arch != "HOPPER" || g.driver_version.startsWith("570."))
`))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	matched := policy.GPUEvidence{Label: "GPU-1", Arch: "HOPPER", Status: "matched", DeviceSigned: true, NVIDIARoot: true, DriverVersion: "570.124.03"}
	tests := []struct {
		name string
		gpus []policy.GPUEvidence
		want []bool
	}{
		{"none", nil, []bool{false, true, true}},
		{"matched", []policy.GPUEvidence{matched}, []bool{true, true, true}},
		{"one unattested", []policy.GPUEvidence{matched, {Label: "GPU-2", Status: "unattested", Reason: "A100: no device attestation"}}, []bool{false, false, true}},
		{"simulated", []policy.GPUEvidence{{Label: "GPU-1", Arch: "HOPPER", Status: "matched", DeviceSigned: true, DriverVersion: "570.1"}}, []bool{false, true, true}},
		{"another driver", []policy.GPUEvidence{{Label: "GPU-1", Arch: "HOPPER", Status: "not-checked", DeviceSigned: true, NVIDIARoot: true, DriverVersion: "590.12"}}, []bool{false, true, false}},
	}
	for _, tc := range tests {
		got, err := prog.Evaluate(t.Context(), policy.Input{Predicate: json.RawMessage(`{}`), GPUEvidence: tc.gpus})
		if err != nil {
			t.Fatal(err)
		}
		var passed []bool
		for _, r := range got {
			if r.Error != "" {
				t.Errorf("%s: rule %q: %s", tc.name, r.Name, r.Error)
			}
			passed = append(passed, r.Passed)
		}
		if diff := cmp.Diff(tc.want, passed); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}
