package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// APIVersion and Kind are the only accepted header values.
const (
	APIVersion = "gpuattest.dev/v1"
	Kind       = "Policy"
)

// Policy is a named list of rules that all must hold.
type Policy struct {
	// APIVersion is "gpuattest.dev/v1".
	APIVersion string `yaml:"apiVersion" json:"apiVersion" jsonschema:"enum=gpuattest.dev/v1"`
	// Kind is "Policy".
	Kind string `yaml:"kind" json:"kind" jsonschema:"enum=Policy"`
	// Rules must all evaluate to true.
	Rules []Rule `yaml:"rules" json:"rules" jsonschema:"minItems=1"`

	// source names the file the policy came from, for messages.
	source string
	// positions maps "rules[i].expr" etc. to "line:col".
	positions map[string]string
}

// Rule is one named CEL expression over the statement.
type Rule struct {
	// Name names the rule in reports; unique within the policy.
	Name string `yaml:"name" json:"name" jsonschema:"minLength=1"`
	// Expr is a CEL expression that evaluates to a bool.
	Expr string `yaml:"expr" json:"expr" jsonschema:"minLength=1"`
	// Message says what the rule requires, shown when it fails.
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
}

// Source names where the policy came from ("default" for Default).
func (p *Policy) Source() string { return p.source }

// Default returns the policy applied when none is given: every step passed
// and the hardware was not simulated.
func Default() *Policy {
	return &Policy{
		APIVersion: APIVersion,
		Kind:       Kind,
		source:     "default",
		Rules: []Rule{
			{
				Name:    "all steps passed",
				Expr:    `predicate.result == "passed" && size(predicate.failed_steps) == 0 && predicate.steps.all(s, s.verdict in ["passed", "cached"])`,
				Message: "every step of the run must have passed",
			},
			{
				Name:    "hardware not simulated",
				Expr:    `!predicate.simulated`,
				Message: "the run must have used real GPUs, not a simulated device",
			},
		},
	}
}

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return Parse(path, b)
}

// Parse decodes and validates a policy; name is used in messages. Unknown
// fields are errors; every problem is reported with its line:col.
func Parse(name string, src []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalWithOptions(src, &p, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %s", name, yaml.FormatError(err, false, true))
	}
	p.source = name
	p.positions = positions(src)
	var errs []error
	at := func(field string) string {
		if pos, ok := p.positions[field]; ok {
			return name + ":" + pos
		}
		return name
	}
	if p.APIVersion != APIVersion {
		errs = append(errs, fmt.Errorf("%s: apiVersion %q: expected %q", at("apiVersion"), p.APIVersion, APIVersion))
	}
	if p.Kind != Kind {
		errs = append(errs, fmt.Errorf("%s: kind %q: expected %q", at("kind"), p.Kind, Kind))
	}
	if len(p.Rules) == 0 {
		errs = append(errs, fmt.Errorf("%s: rules: expected at least one rule", at("rules")))
	}
	seen := map[string]bool{}
	for i, r := range p.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		if strings.TrimSpace(r.Name) == "" {
			errs = append(errs, fmt.Errorf("%s: %s.name: expected a non-empty name", at(f), f))
		} else if seen[r.Name] {
			errs = append(errs, fmt.Errorf("%s: %s.name %q: duplicate rule name", at(f+".name"), f, r.Name))
		}
		seen[r.Name] = true
		if strings.TrimSpace(r.Expr) == "" {
			errs = append(errs, fmt.Errorf("%s: %s.expr: expected a CEL expression", at(f), f))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if _, err := p.Compile(); err != nil {
		return nil, err
	}
	return &p, nil
}

// positions maps field paths of a policy document to "line:col".
func positions(src []byte) map[string]string {
	out := map[string]string{}
	f, err := parser.ParseBytes(src, 0)
	if err != nil || len(f.Docs) == 0 {
		return out
	}
	root, ok := f.Docs[0].Body.(*ast.MappingNode)
	if !ok {
		return out
	}
	pos := func(n ast.Node) string {
		t := n.GetToken()
		return fmt.Sprintf("%d:%d", t.Position.Line, t.Position.Column)
	}
	for _, kv := range root.Values {
		k := kv.Key.String()
		out[k] = pos(kv.Value)
		if k != "rules" {
			continue
		}
		seq, ok := kv.Value.(*ast.SequenceNode)
		if !ok {
			continue
		}
		for i, item := range seq.Values {
			f := fmt.Sprintf("rules[%d]", i)
			out[f] = pos(item)
			m, ok := item.(*ast.MappingNode)
			if !ok {
				continue
			}
			for _, rkv := range m.Values {
				out[f+"."+rkv.Key.String()] = pos(rkv.Value)
			}
		}
	}
	return out
}

// Input is what the rules see.
type Input struct {
	// PredicateType is the statement's predicate type.
	PredicateType string
	// Predicate is the predicate as JSON.
	Predicate json.RawMessage
	// Subjects are the statement's subjects as JSON objects
	// ({"name": ..., "digest": {"sha256": ...}}).
	Subjects json.RawMessage
}

// RuleResult is one rule's outcome.
type RuleResult struct {
	// Name is the rule's name.
	Name string `json:"name"`
	// Expr is the rule's expression.
	Expr string `json:"expr"`
	// Message is the rule's message.
	Message string `json:"message,omitempty"`
	// Passed is true when the expression evaluated to true.
	Passed bool `json:"passed"`
	// Error says why the expression could not be evaluated (a missing
	// field, a non-bool result); the rule then fails.
	Error string `json:"error,omitempty"`
}

// Program is a compiled policy.
type Program struct {
	policy *Policy
	progs  []cel.Program
}

// costLimit bounds the evaluation of one rule.
const costLimit = 10_000_000

func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("predicate", cel.DynType),
		cel.Variable("subjects", cel.ListType(cel.DynType)),
		cel.Variable("predicateType", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
	)
}

// Compile type-checks every rule; errors name the rule and its position.
func (p *Policy) Compile() (*Program, error) {
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("creating CEL environment: %w", err)
	}
	prog := &Program{policy: p}
	var errs []error
	for i, r := range p.Rules {
		where := p.source
		if pos, ok := p.positions[fmt.Sprintf("rules[%d].expr", i)]; ok {
			where += ":" + pos
		}
		ast, iss := env.Compile(r.Expr)
		if iss.Err() != nil {
			errs = append(errs, fmt.Errorf("%s: rule %q: compiling expr: %s", where, r.Name, strings.TrimSpace(iss.Err().Error())))
			continue
		}
		if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
			errs = append(errs, fmt.Errorf("%s: rule %q: expr has type %s: expected bool", where, r.Name, t))
			continue
		}
		pr, err := env.Program(ast, cel.CostLimit(costLimit), cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: rule %q: %w", where, r.Name, err))
			continue
		}
		prog.progs = append(prog.progs, pr)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return prog, nil
}

// Policy returns the compiled policy.
func (pr *Program) Policy() *Policy { return pr.policy }

// Evaluate runs every rule over in. The error is set only when in itself
// cannot be decoded; failing rules are reported in the results.
func (pr *Program) Evaluate(ctx context.Context, in Input) ([]RuleResult, error) {
	var pred any
	dec := json.NewDecoder(bytes.NewReader(in.Predicate))
	if err := dec.Decode(&pred); err != nil {
		return nil, fmt.Errorf("decoding predicate: %w", err)
	}
	if _, ok := pred.(map[string]any); !ok {
		return nil, errors.New("predicate: expected a JSON object")
	}
	var subj []any
	if len(in.Subjects) > 0 {
		if err := json.Unmarshal(in.Subjects, &subj); err != nil {
			return nil, fmt.Errorf("decoding subjects: %w", err)
		}
	}
	if subj == nil {
		subj = []any{}
	}
	vars := map[string]any{"predicate": pred, "subjects": subj, "predicateType": in.PredicateType}
	out := make([]RuleResult, len(pr.progs))
	for i, p := range pr.progs {
		r := pr.policy.Rules[i]
		out[i] = RuleResult{Name: r.Name, Expr: r.Expr, Message: r.Message}
		val, _, err := p.ContextEval(ctx, vars)
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		b, ok := val.Value().(bool)
		if !ok {
			out[i].Error = fmt.Sprintf("expr evaluated to %s, expected bool", val.Type().TypeName())
			continue
		}
		out[i].Passed = b
	}
	return out, nil
}
