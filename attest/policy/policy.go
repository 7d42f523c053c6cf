package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/limits"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// APIVersion and Kind are the only accepted header values.
const (
	APIVersion = "gpuattest.dev/v1"
	Kind       = "Policy"
)

// Policy is a named list of rules that all must hold.
type Policy struct {
	// APIVersion is "gpuattest.dev/v1".
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	// Kind is "Policy".
	Kind string `yaml:"kind" json:"kind"`
	// Rules must all evaluate to true.
	Rules []Rule `yaml:"rules" json:"rules"`
	// Coverage, when set, asks for GPU coverage of the pinned targets
	// across all the bundles verified together (see Coverage).
	Coverage *Coverage `yaml:"coverage,omitempty" json:"coverage,omitempty"`

	// source names the file the policy came from, for messages.
	source string
	// positions maps "rules[i].expr" etc. to the value's position.
	positions map[string]position
	// compiled is the program Parse compiled to check the rules, kept
	// with the rules it was compiled from, so that Compile does not
	// compile them a second time (the bulk of a large policy's cost).
	compiled      *Program
	compiledRules []Rule
}

// Rule is one named CEL expression over the statement.
type Rule struct {
	// Name names the rule in reports; unique within the policy.
	Name string `yaml:"name" json:"name"`
	// Expr is a CEL expression that evaluates to a bool.
	Expr string `yaml:"expr" json:"expr"`
	// Message says what the rule requires, shown when it fails.
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
}

// Source names where the policy came from ("default" for Default,
// "builtin:NAME" for a built-in policy, else the file).
func (p *Policy) Source() string { return p.source }

// MaxSize is the largest policy file Load reads, and the largest policy
// Parse accepts.
const MaxSize = 1 << 20

// Load reads and parses the policy file at path, a regular file of at
// most MaxSize bytes.
func Load(path string) (*Policy, error) {
	b, err := limits.ReadFile(path, MaxSize, "policy")
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return Parse(path, b)
}

// Parse decodes and validates a policy; name is used in messages. Unknown
// fields are errors; every problem is reported with its line:col. A
// policy is one YAML document of at most MaxSize bytes, MaxDepth levels
// and MaxRules rules of at most MaxExprSize bytes, without tags, anchors or aliases; a rule whose expression YAML
// folded from several lines may not hold a // comment (it would comment
// out the rest of the rule).
func Parse(name string, src []byte) (*Policy, error) {
	f, err := checkYAML(name, src)
	if err != nil {
		return nil, err
	}
	var p Policy
	if err := yaml.UnmarshalWithOptions(src, &p, yaml.Strict()); err != nil {
		return nil, problem.List{yamlProblem(name, err)}
	}
	p.source = name
	var folded map[string]bool
	p.positions, folded = positions(f)
	if len(p.Rules) > MaxRules {
		f := fmt.Sprintf("rules[%d]", MaxRules)
		return nil, problem.List{p.problem(f, f, "", "%d rules, more than the limit of %d a policy may have", len(p.Rules), MaxRules)}
	}
	if probs := p.validate(folded); len(probs) > 0 {
		return nil, probs
	}
	if _, err := p.Compile(); err != nil {
		return nil, err
	}
	return &p, nil
}

// validate returns every problem of a decoded policy, each at the
// position of its field (at, when the field has none) with its path.
func (p *Policy) validate(folded map[string]bool) problem.List {
	var l problem.List
	if p.APIVersion != APIVersion {
		l = append(l, p.problem("apiVersion", "apiVersion", "", "%q: expected %q", p.APIVersion, APIVersion))
	}
	if p.Kind != Kind {
		l = append(l, p.problem("kind", "kind", "", "%q: expected %q", p.Kind, Kind))
	}
	if len(p.Rules) == 0 {
		l = append(l, p.problem("rules", "rules", "", "expected at least one rule"))
	}
	seen := map[string]bool{}
	for i, r := range p.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		if strings.TrimSpace(r.Name) == "" {
			l = append(l, p.problem(f, f+".name", "", "expected a non-empty name"))
		} else if seen[r.Name] {
			l = append(l, p.problem(f+".name", f+".name", "", "%q: duplicate rule name", r.Name))
		}
		seen[r.Name] = true
		if strings.TrimSpace(r.Expr) == "" {
			l = append(l, p.problem(f, f+".expr", "", "expected a CEL expression"))
		}
		if len(r.Expr) > MaxExprSize {
			l = append(l, p.problem(f+".expr", f+".expr", "split the rule", "%d bytes, more than the limit of %d an expression may have", len(r.Expr), MaxExprSize))
		}
		if folded[f+".expr"] && foldedComment(r.Expr) {
			l = append(l, p.problem(f+".expr", f+".expr", "write the rule as a literal block (expr: |) to keep its line ends, or remove the comment",
				"a // comment in an expression YAML folds onto one line comments out the rest of the rule"))
		}
	}
	return l
}

// problem is a problem of the policy at path, placed at the position of
// the field at (the policy's file alone when it has none).
func (p *Policy) problem(at, path, hint, format string, args ...any) problem.Problem {
	pos := p.positions[at]
	return problem.Problem{File: p.source, Line: pos.Line, Col: pos.Col, Path: path, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// position is a 1-based line and column.
type position struct{ Line, Col int }

// positions maps field paths of a policy document to their positions, and
// notes the fields whose scalar YAML folded from several lines.
func positions(f *ast.File) (map[string]position, map[string]bool) {
	out, folded := map[string]position{}, map[string]bool{}
	if f == nil || len(f.Docs) == 0 {
		return out, folded
	}
	root, ok := f.Docs[0].Body.(*ast.MappingNode)
	if !ok {
		return out, folded
	}
	pos := func(n ast.Node) position {
		t := n.GetToken()
		return position{t.Position.Line, t.Position.Column}
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
				folded[f+"."+rkv.Key.String()] = isFolded(rkv.Value)
			}
		}
	}
	return out, folded
}

// Input is what the rules see.
type Input struct {
	// PredicateType is the statement's predicate type.
	PredicateType string
	// Predicate is the predicate as JSON.
	Predicate json.RawMessage
	// Decoded, when set, is Predicate already decoded; it is read
	// instead of Predicate.
	Decoded *Predicate
	// Subjects are the statement's subjects as JSON objects
	// ({"name": ..., "digest": {"sha256": ...}}).
	Subjects json.RawMessage
	// GPUEvidence is the verifier's verdict on each GPU's signed
	// evidence (attest/gpuevidence), one per GPU of the run: what the
	// rules see as gpuEvidence. Empty when the statement carries none.
	GPUEvidence []GPUEvidence
}

// GPUEvidence is the verifier's verdict on one GPU's evidence, as the
// rules see it: gpuEvidence is a list of objects with these fields (the
// JSON names), for example
//
//	gpuEvidence.all(g, g.status == "matched" && g.nvidia_root)
//
// requires every GPU device-signed under NVIDIA's root with its
// measurements matched.
type GPUEvidence struct {
	// Label names the GPU (its UUID, or job and UUID in a fleet).
	Label string `json:"label"`
	// Arch is "HOPPER" or "BLACKWELL"; empty for an unattested GPU.
	Arch string `json:"arch"`
	// Status is "matched" (device-signed, measurements matched),
	// "not-checked" (device-signed, measurements not checked),
	// "unattested" or "failed".
	Status string `json:"status"`
	// Reason says why measurements were not checked or the GPU is
	// unattested.
	Reason string `json:"reason"`
	// DeviceSigned is true when the GPU signed the report under the
	// device root, over the recomputed nonce, with its leaf's FWID.
	DeviceSigned bool `json:"device_signed"`
	// NVIDIARoot is true when that root is NVIDIA's pinned one (false for
	// a simulated GPU under a test root).
	NVIDIARoot bool `json:"nvidia_root"`
	// Model, DriverVersion and VBIOSVersion are what the signed report
	// and its chain say.
	Model         string `json:"model"`
	DriverVersion string `json:"driver_version"`
	VBIOSVersion  string `json:"vbios_version"`
}

// value is g as the rules see it.
func (g GPUEvidence) value() map[string]any {
	return map[string]any{
		"label": g.Label, "arch": g.Arch, "status": g.Status, "reason": g.Reason,
		"device_signed": g.DeviceSigned, "nvidia_root": g.NVIDIARoot,
		"model": g.Model, "driver_version": g.DriverVersion, "vbios_version": g.VBIOSVersion,
	}
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
	// field, a non-bool result, the cost limit); the rule then fails.
	Error string `json:"error,omitempty"`
	// CostLimitExceeded is true when the rule was stopped by the cost
	// limit: it neither holds nor fails, it could not be decided.
	CostLimitExceeded bool `json:"cost_limit_exceeded,omitempty"`
	// Cost is what evaluating the rule cost, in cel-go's cost units.
	Cost uint64 `json:"cost"`
}

// Program is a compiled policy.
type Program struct {
	policy *Policy
	progs  []cel.Program
}

// DefaultCostLimit is the most that evaluating a policy over one input
// may cost by default, all rules together, in cel-go's cost units (one
// per identifier, field selection, operator and call; strings, lists and
// regular expressions by their size). It is about a second of CPU time;
// the default policy over a 10 MB predicate of 117,000 steps (with the
// gpu, backend and devices facts it reads) costs about 4.3 million.
const DefaultCostLimit = 15_000_000

func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("predicate", cel.DynType),
		cel.Variable("subjects", cel.ListType(cel.DynType)),
		cel.Variable("predicateType", cel.StringType),
		cel.Variable("gpuEvidence", cel.ListType(cel.DynType)),
		cel.Variable("coverage", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
	)
}

// Compile type-checks every rule; errors name the rule and its position.
// A policy compiles once: later calls (verify's, after the one Parse makes
// to check the rules) return the same program while its rules are
// unchanged. Compile is not safe for concurrent use on one Policy.
func (p *Policy) Compile() (*Program, error) {
	if p.compiled != nil && slices.Equal(p.Rules, p.compiledRules) {
		return p.compiled, nil
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("creating CEL environment: %w", err)
	}
	prog := &Program{policy: p}
	var errs problem.List
	for i, r := range p.Rules {
		f := fmt.Sprintf("rules[%d].expr", i)
		var ast *cel.Ast
		var iss *cel.Issues
		if parsed, ok := parsedBuiltin(r.Expr); ok {
			ast, iss = env.Check(parsed)
		} else {
			ast, iss = env.Compile(r.Expr)
		}
		if iss.Err() != nil {
			errs = append(errs, p.problem(f, "", "", "rule %q: compiling expr: %s", r.Name, strings.TrimSpace(iss.Err().Error())))
			continue
		}
		if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
			errs = append(errs, p.problem(f, "", "", "rule %q: expr has type %s: expected bool", r.Name, t))
			continue
		}
		// The meter, not cel.CostLimit, bounds the cost: see meter.go.
		pr, err := env.Program(ast, cel.CustomDecorator(meter))
		if err != nil {
			errs = append(errs, p.problem(f, "", "", "rule %q: %v", r.Name, err))
			continue
		}
		prog.progs = append(prog.progs, pr)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	p.compiled, p.compiledRules = prog, slices.Clone(p.Rules)
	return prog, nil
}

// Policy returns the compiled policy.
func (pr *Program) Policy() *Policy { return pr.policy }

// EvalOption configures one evaluation.
type EvalOption func(*evalOptions) error

type evalOptions struct {
	costLimit uint64
}

// WithCostLimit sets the most the rules may cost together on this input
// (default DefaultCostLimit). A rule that reaches it is stopped and
// reported with CostLimitExceeded, as are the rules after it.
func WithCostLimit(units uint64) EvalOption {
	return func(o *evalOptions) error {
		if units == 0 {
			return errors.New("cost limit: expected a positive number of units")
		}
		o.costLimit = units
		return nil
	}
}

// Evaluate runs every rule over in. The error is set only when in itself
// cannot be decoded or ctx is done; failing rules, rules that cannot be
// evaluated and rules over the cost limit are reported in the results.
func (pr *Program) Evaluate(ctx context.Context, in Input, opts ...EvalOption) ([]RuleResult, error) {
	o := evalOptions{costLimit: DefaultCostLimit}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	vars, err := in.activation()
	if err != nil {
		return nil, err
	}
	b := &budget{limit: o.costLimit, done: ctx.Done()}
	act := &meterActivation{vars: vars, budget: b}
	out := make([]RuleResult, len(pr.progs))
	for i, p := range pr.progs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r := pr.policy.Rules[i]
		out[i] = RuleResult{Name: r.Name, Expr: r.Expr, Message: r.Message}
		if b.cost > b.limit {
			// An earlier rule spent the budget: not evaluated.
			out[i].CostLimitExceeded, out[i].Error = true, costLimitError(b.limit)
			continue
		}
		before := b.cost
		b.stack = b.stack[:0]
		val, _, err := p.Eval(act)
		out[i].Cost = min(b.cost, b.limit) - min(before, b.limit)
		var cancelled interpreter.EvalCancelledError
		switch {
		case errors.As(err, &cancelled) && cancelled.Cause == interpreter.ContextCancelled:
			return nil, context.Cause(ctx)
		case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
			out[i].CostLimitExceeded, out[i].Error = true, costLimitError(b.limit)
		case err != nil:
			out[i].Error = err.Error()
		default:
			out[i].Passed, out[i].Error = boolResult(val)
		}
	}
	return out, nil
}

func costLimitError(limit uint64) string {
	return fmt.Sprintf("cost limit exceeded: the rules may cost %d units on one input", limit)
}

// boolResult reads a rule's value.
func boolResult(val ref.Val) (bool, string) {
	b, ok := val.Value().(bool)
	if !ok {
		return false, fmt.Sprintf("expr evaluated to %s, expected bool", val.Type().TypeName())
	}
	return b, ""
}

// activation decodes in into the rules' variables.
func (in Input) activation() (interpreter.Activation, error) {
	pred := in.Decoded
	if pred == nil {
		var err error
		if pred, err = DecodePredicate(in.Predicate); err != nil {
			return nil, err
		}
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
	gpus := make([]any, len(in.GPUEvidence))
	for i, g := range in.GPUEvidence {
		gpus[i] = g.value()
	}
	// coverage is the predicate's coverage totals; an empty map without
	// any, so that a rule reading coverage.lines fails on a run that
	// measured none.
	var cov any = map[string]any{}
	if c, ok := pred.tree["coverage"].(map[string]any); ok {
		cov = c
	}
	return interpreter.NewActivation(map[string]any{"predicate": pred.tree, "subjects": subj, "predicateType": in.PredicateType, "gpuEvidence": gpus, "coverage": cov})
}
