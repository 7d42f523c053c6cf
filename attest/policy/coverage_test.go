package policy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/policy"
)

// runPredicate is a predicate pinning targets whose one test ran with
// backend on a GPU of compute capability cc (none when cc is empty).
func runPredicate(result string, targets []string, verdict, backend, cc string, simulated bool) json.RawMessage {
	devs := "[]"
	if cc != "" {
		devs = fmt.Sprintf(`[{"uuid":"GPU-%s","name":"GPU %s","compute_capability":%q,"simulated":%v}]`, cc, cc, cc, simulated)
	}
	tj, _ := json.Marshal(targets)
	return json.RawMessage(fmt.Sprintf(`{"result":%q,"build":{"targets":%s},"steps":[{"id":"validate","kind":"test","verdict":%q,"gpu":true,"backend":%q,"devices":%s}]}`,
		result, tj, verdict, backend, devs))
}

func TestCoverage(t *testing.T) {
	t.Parallel()
	both := []string{"sm_80", "sm_90"}
	a100 := runPredicate("passed", both, "passed", "cuda", "8.0", false)
	h100 := runPredicate("passed", both, "passed", "cuda", "9.0", false)
	cpu := runPredicate("passed", both, "passed", "cpu", "", false)
	simA100 := runPredicate("passed", both, "passed", "cpu", "8.0", true)
	simH100 := runPredicate("passed", both, "passed", "cpu", "9.0", true)
	tests := []struct {
		name           string
		preds          []json.RawMessage
		allowSimulated bool
		want           map[string]bool
		wantDetail     string
	}{
		{"a100 and h100", []json.RawMessage{a100, h100}, false, map[string]bool{"sm_80": true, "sm_90": true}, "covered by b0: step validate on cuda (GPU 8.0, cc 8.0)"},
		{"a100 alone", []json.RawMessage{a100}, false, map[string]bool{"sm_80": true, "sm_90": false}, "sm_90 missing: no passed test, benchmark or burn-in ran on a GPU of compute capability 9.0; the bundles ran: b0: validate on cuda (GPU 8.0, cc 8.0)"},
		{"cpu only", []json.RawMessage{cpu}, false, map[string]bool{"sm_80": false, "sm_90": false}, "b0: validate on cpu, no GPU"},
		{"failed run covers nothing", []json.RawMessage{runPredicate("failed", both, "failed", "cuda", "8.0", false), h100}, false, map[string]bool{"sm_80": false, "sm_90": true}, "sm_80 missing"},
		{"cuda on a gpu of another cc", []json.RawMessage{runPredicate("passed", both, "passed", "cuda", "8.6", false), h100}, false, map[string]bool{"sm_80": false, "sm_90": true}, "cc 8.6"},
		{"simulated refused", []json.RawMessage{simA100, simH100}, false, map[string]bool{"sm_80": false, "sm_90": false}, "SIMULATED"},
		{"simulated allowed, one", []json.RawMessage{simA100}, true, map[string]bool{"sm_80": true, "sm_90": false}, "sm_90 missing"},
		{"simulated allowed, both", []json.RawMessage{simA100, simH100}, true, map[string]bool{"sm_80": true, "sm_90": true}, "on cpu (GPU 9.0, cc 9.0) SIMULATED"},
		{"sm_90a by 9.0", []json.RawMessage{runPredicate("passed", []string{"sm_90a"}, "passed", "cuda", "9.0", false)}, false, map[string]bool{"sm_90a": true}, ""},
		{"sm_100f by 10.3", []json.RawMessage{runPredicate("passed", []string{"sm_100f"}, "passed", "cuda", "10.3", false)}, false, map[string]bool{"sm_100f": true}, ""},
		{"sm_100a not by 10.3", []json.RawMessage{runPredicate("passed", []string{"sm_100a"}, "passed", "cuda", "10.3", false)}, false, map[string]bool{"sm_100a": false}, ""},
		{"no target: a gpu run", []json.RawMessage{runPredicate("passed", nil, "passed", "cuda", "9.0", false)}, false, map[string]bool{"gpu": true}, ""},
		{"no target, no gpu run", []json.RawMessage{runPredicate("passed", nil, "passed", "cpu", "", false)}, false, map[string]bool{"gpu": false}, "gpu run missing"},
	}
	cov := &policy.Coverage{Targets: true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ins []policy.CoverageInput
			for i, p := range tt.preds {
				ins = append(ins, policy.CoverageInput{Source: fmt.Sprintf("b%d", i), Predicate: p})
			}
			got, err := cov.Check(ins, tt.allowSimulated)
			if err != nil {
				t.Fatal(err)
			}
			gotMap := map[string]bool{}
			var details []string
			for _, tc := range got {
				gotMap[tc.Target] = tc.Covered
				details = append(details, tc.Detail)
			}
			if fmt.Sprint(gotMap) != fmt.Sprint(tt.want) {
				t.Errorf("covered = %v, want %v\n%s", gotMap, tt.want, strings.Join(details, "\n"))
			}
			if all := strings.Join(details, "\n"); !strings.Contains(all, tt.wantDetail) {
				t.Errorf("details lack %q:\n%s", tt.wantDetail, all)
			}
		})
	}
}

// TestCoverageBounded: a predicate of many steps and targets gives
// messages of bounded length and an unreadable one an error naming it.
func TestCoverageBounded(t *testing.T) {
	t.Parallel()
	var steps []string
	for i := range 50_000 {
		steps = append(steps, fmt.Sprintf(`{"id":"s%d","kind":"test","verdict":"passed","backend":"cpu","devices":[]}`, i))
	}
	pred := `{"result":"passed","build":{"targets":["sm_80","sm_90"]},"steps":[` + strings.Join(steps, ",") + `]}`
	got, err := (&policy.Coverage{Targets: true}).Check([]policy.CoverageInput{{Source: "big", Predicate: json.RawMessage(pred)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range got {
		if tc.Covered || len(tc.Detail) > 1000 || !strings.Contains(tc.Detail, "and 49996 more") {
			t.Errorf("%s: covered=%v, detail of %d bytes: %.300s", tc.Target, tc.Covered, len(tc.Detail), tc.Detail)
		}
	}
	// Targets past MaxCoverageTargets fail coverage as such, in one line.
	var many []string
	for i := range 100_000 {
		many = append(many, fmt.Sprintf("%q", fmt.Sprintf("sm_%d", i)))
	}
	pred = `{"result":"passed","build":{"targets":[` + strings.Join(many, ",") + `]},"steps":[]}`
	got, err = (&policy.Coverage{Targets: true}).Check([]policy.CoverageInput{{Source: "many", Predicate: json.RawMessage(pred)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Covered || !strings.Contains(got[0].Detail, "more than 64 distinct targets") {
		t.Errorf("100000 targets: %+v", got)
	}
	if _, err := (&policy.Coverage{Targets: true}).Check([]policy.CoverageInput{{Source: "bad.json:3", Predicate: json.RawMessage(`{"steps":"no"}`)}}, false); err == nil || !strings.Contains(err.Error(), "bad.json:3") {
		t.Errorf("err = %v, want one naming bad.json:3", err)
	}
}

func TestBuiltin(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		arg            string
		allowSimulated bool
		source         string
		rules          []string
		coverage       bool
		wantErr        string
	}{
		{arg: "builtin:default", source: "default", rules: []string{"all steps passed", "hardware not simulated", "gpu steps ran with backend cuda on real GPUs", "no enforced gate ended AMBIGUOUS"}, coverage: true},
		{arg: "builtin:default", allowSimulated: true, source: "default", rules: []string{"all steps passed", "gpu steps ran on GPUs (simulated accepted)", "no enforced gate ended AMBIGUOUS"}, coverage: true},
		{arg: "builtin:cpu-tier", source: "builtin:cpu-tier", rules: []string{"all steps passed", "hardware not simulated", "cpu tier: every test, benchmark and burn-in ran cases", "no enforced gate ended AMBIGUOUS"}},
		{arg: "builtin:cpu-tier", allowSimulated: true, source: "builtin:cpu-tier", rules: []string{"all steps passed", "cpu tier: every test, benchmark and burn-in ran cases", "no enforced gate ended AMBIGUOUS"}},
		{arg: "builtin:gpu-tier", wantErr: "policy builtin:gpu-tier: no such built-in policy\nhint: the built-in policies are builtin:default and builtin:cpu-tier"},
	} {
		p, err := policy.Open(tt.arg, tt.allowSimulated)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s: err = %v, want %q", tt.arg, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range p.Rules {
			names = append(names, r.Name)
		}
		if p.Source() != tt.source || fmt.Sprint(names) != fmt.Sprint(tt.rules) || (p.Coverage != nil) != tt.coverage {
			t.Errorf("%s (simulated %v): source %q rules %q coverage %v", tt.arg, tt.allowSimulated, p.Source(), names, p.Coverage != nil)
		}
		if _, err := p.Compile(); err != nil {
			t.Errorf("%s: %v", tt.arg, err)
		}
	}
}

// TestCPUTier: the CPU tier accepts a passing run on the CPU backend and
// refuses one whose suite ran no case.
func TestCPUTier(t *testing.T) {
	t.Parallel()
	p, err := policy.Builtin(policy.BuiltinCPUTier, false)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cases string
		want  bool
	}{
		{`,"cases":{"total":4,"passed":4,"failed":0,"skipped":0,"errored":0}`, true},
		{`,"cases":{"total":0,"passed":0,"failed":0,"skipped":0,"errored":0}`, false},
		{``, false},
	} {
		pred := `{"result":"passed","failed_steps":[],"simulated":false,"steps":[{"kind":"test","verdict":"passed","gpu":false,"backend":"cpu","devices":[]` + tt.cases + `}]}`
		res, err := prog.Evaluate(t.Context(), policy.Input{Predicate: json.RawMessage(pred)})
		if err != nil {
			t.Fatal(err)
		}
		all := true
		for _, r := range res {
			all = all && r.Passed
		}
		if all != tt.want {
			t.Errorf("cases %q: passed %v, want %v: %+v", tt.cases, all, tt.want, res)
		}
	}
}

// TestParseCoverage: a policy file asks for coverage with its own rules.
func TestParseCoverage(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("p.yaml", []byte(header+"rules:\n  - name: a\n    expr: 'true'\ncoverage:\n  targets: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Coverage == nil || !p.Coverage.Targets {
		t.Errorf("coverage = %+v, want targets", p.Coverage)
	}
	if _, err := policy.Parse("p.yaml", []byte(header+"rules:\n  - name: a\n    expr: 'true'\ncoverage:\n  target: true\n")); err == nil || !strings.Contains(err.Error(), `unknown field "target"`) {
		t.Errorf("err = %v, want unknown field", err)
	}
}
