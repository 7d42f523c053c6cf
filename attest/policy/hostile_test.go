package policy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/policy"
)

// TestParseHostile: policy files that would be read otherwise than they
// look, or that cost too much to read, are refused with a position.
func TestParseHostile(t *testing.T) {
	t.Parallel()
	rule := "rules:\n  - name: a\n    expr: 'true'\n"
	tests := []struct {
		name, src string
		wantErr   string
	}{
		{name: "second document", src: header + rule + "---\n" + header + "rules:\n  - name: b\n    expr: 'false'\n",
			wantErr: "p.yaml:6:1: a second YAML document: a policy file holds one document"},
		{name: "binary tag", src: header + rule + "    message: !!binary aGVsbG8=\n", wantErr: "p.yaml:6:14: tag !!binary: a policy file may not use YAML tags"},
		{name: "str tag", src: header + "rules:\n  - name: a\n    expr: !!str 'true'\n", wantErr: "tag !!str"},
		{name: "anchor and alias", src: header + "rules:\n  - &r\n    name: a\n    expr: 'true'\n  - *r\n", wantErr: "may not use YAML anchors or aliases"},
		{name: "deep flow nesting", src: header + "rules: " + strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000) + "\n", wantErr: "p.yaml:3:40: nesting deeper than 32 levels"},
		{name: "deep block nesting", src: header + "x:\n" + deepBlock(40) + rule, wantErr: "nesting deeper than 32 levels"},
		{name: "too large", src: header + rule + "# " + strings.Repeat("x", policy.MaxSize) + "\n", wantErr: "more than the limit of 1048576"},
		{name: "too many rules", src: header + "rules:\n" + strings.Repeat("  - name: a\n    expr: 'true'\n", policy.MaxRules+1), wantErr: "p.yaml:516:9: rules[256]: 257 rules, more than the limit of 256"},
		{name: "long expression", src: header + "rules:\n  - name: a\n    expr: '" + strings.Repeat("true || ", 300) + "true'\n", wantErr: "p.yaml:5:11: rules[0].expr: 2404 bytes, more than the limit of 2048"},
		{name: "folded block comment", src: header + "rules:\n  - name: real\n    expr: >\n      predicate.result == \"passed\" // must pass\n      && !predicate.simulated\n",
			wantErr: "p.yaml:5:11: rules[0].expr: a // comment in an expression YAML folds onto one line comments out the rest of the rule"},
		{name: "plain multi-line comment", src: header + "rules:\n  - name: real\n    expr: predicate.result == \"passed\" // must pass\n      && !predicate.simulated\n",
			wantErr: "rules[0].expr: a // comment"},
		{name: "quoted multi-line comment", src: header + "rules:\n  - name: real\n    expr: 'predicate.result == \"passed\" // must pass\n      && !predicate.simulated'\n",
			wantErr: "rules[0].expr: a // comment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := policy.Parse("p.yaml", []byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("refusing took %s", took)
			}
		})
	}
}

func deepBlock(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat("  ", i+1) + "k:\n")
	}
	b.WriteString(strings.Repeat("  ", n+1) + "v: 1\n")
	return b.String()
}

// TestParseAccepts: what looks like nesting or a comment but is not.
func TestParseAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		pred      string
		want      bool
	}{
		{name: "comment in a literal block ends at its line", src: header + "rules:\n  - name: real\n    expr: |\n      predicate.result == \"passed\" // must pass\n      && !predicate.simulated\n",
			pred: `{"result":"passed","simulated":true}`, want: false},
		{name: "// in a string of a folded rule", src: header + "rules:\n  - name: uri\n    expr: >\n      predicate.uri.startsWith(\"https://example.com\")\n      && true\n",
			pred: `{"uri":"https://example.com/x"}`, want: true},
		{name: "one-line comment", src: header + "rules:\n  - name: c\n    expr: predicate.ok // note\n", pred: `{"ok":true}`, want: true},
		{name: "brackets in quotes and comments", src: header + "# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n" +
			"rules:\n  - name: b\n    message: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n    expr: |\n      [[[[[[[[[[1]]]]]]]]]].size() == 1\n",
			pred: `{}`, want: true},
		{name: "it's not a quote", src: header + "rules:\n  - name: it's [a] rule\n    expr: size([[1]]) == 1\n", pred: `{}`, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := policy.Parse("p.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			prog, err := p.Compile()
			if err != nil {
				t.Fatal(err)
			}
			res, err := prog.Evaluate(t.Context(), policy.Input{Predicate: json.RawMessage(tt.pred)})
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Passed != tt.want {
				t.Errorf("passed = %v (%s), want %v", res[0].Passed, res[0].Error, tt.want)
			}
		})
	}
}
