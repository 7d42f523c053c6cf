package policy

import (
	"fmt"
	"strings"
)

// BuiltinPrefix starts the name of a built-in policy where a policy file
// is expected (--policy builtin:cpu-tier).
const BuiltinPrefix = "builtin:"

// Built-in policy names.
const (
	// BuiltinDefault is the policy applied when none is given: every step
	// passed, every gpu: true step ran with backend cuda on real GPUs, no
	// enforced benchmark gate ended AMBIGUOUS (a run that passed with
	// warnings under gate.onAmbiguous: warn is refused), and every pinned
	// target is covered by a passing GPU run (Coverage).
	BuiltinDefault = "default"
	// BuiltinCPUTier accepts a run whose suites ran on the CPU backend:
	// every step passed, every test, benchmark and burn-in ran cases, and
	// no enforced benchmark gate ended AMBIGUOUS.
	// It says nothing about any GPU.
	BuiltinCPUTier = "cpu-tier"
)

// suiteKinds are the step kinds that run cases on a backend.
const suiteKinds = `["test", "benchmark", "burnin"]`

var (
	ruleAllPassed = Rule{
		Name:    "all steps passed",
		Expr:    `predicate.result == "passed" && size(predicate.failed_steps) == 0 && predicate.steps.all(s, s.verdict in ["passed", "cached"])`,
		Message: "every step of the run must have passed",
	}
	ruleNoAmbiguousGate = Rule{
		Name: "no enforced gate ended AMBIGUOUS",
		Expr: `!has(predicate.benchmarks) || predicate.benchmarks.all(b, !has(b.comparisons) || ` +
			`b.comparisons.all(c, !(c.enforced && c.verdict == "AMBIGUOUS")))`,
		Message: "every enforced benchmark gate must have decided its cases: an AMBIGUOUS verdict (the data could not tell, passed under gate.onAmbiguous: warn) is no evidence of no regression",
	}
	ruleNotSimulated = Rule{
		Name:    "hardware not simulated",
		Expr:    `!predicate.simulated`,
		Message: "the run must have used real GPUs, not a simulated device",
	}
	ruleGPUStepsReal = Rule{
		Name: "gpu steps ran with backend cuda on real GPUs",
		Expr: `predicate.steps.all(s, !s.gpu || (size(s.devices) > 0 && s.devices.all(d, !d.simulated) && ` +
			`(!(s.kind in ` + suiteKinds + `) || (has(s.backend) && s.backend == "cuda"))))`,
		Message: "every gpu: true step must have run on a real GPU of the hardware record, a test, benchmark or burn-in with backend cuda",
	}
	ruleGPUStepsSimulated = Rule{
		Name: "gpu steps ran on GPUs (simulated accepted)",
		Expr: `predicate.steps.all(s, !s.gpu || (size(s.devices) > 0 && ` +
			`(!(s.kind in ` + suiteKinds + `) || (has(s.backend) && s.backend == "cuda") || s.devices.all(d, d.simulated))))`,
		Message: "every gpu: true step must have run on a GPU of the hardware record (simulated accepted: --allow-simulated), a test, benchmark or burn-in on a real one with backend cuda",
	}
	ruleCPUTierCases = Rule{
		Name:    "cpu tier: every test, benchmark and burn-in ran cases",
		Expr:    `predicate.steps.all(s, !(s.kind in ` + suiteKinds + `) || (has(s.cases) && s.cases.total > 0))`,
		Message: "every test, benchmark and burn-in must have run at least one case (on the CPU backend or a GPU; the CPU tier says nothing about GPUs)",
	}
)

// Default returns the policy applied when none is given (BuiltinDefault,
// simulated hardware refused).
func Default() *Policy {
	p, _ := Builtin(BuiltinDefault, false)
	return p
}

// Builtin returns the built-in policy name ("default" or "cpu-tier",
// with or without BuiltinPrefix). With allowSimulated its rules accept
// simulated hardware (GPUATTEST_FAKE_GPU), and a simulated GPU counts for
// coverage; its source then says so. The default policy keeps its
// source "default".
func Builtin(name string, allowSimulated bool) (*Policy, error) {
	name = strings.TrimPrefix(name, BuiltinPrefix)
	p := &Policy{APIVersion: APIVersion, Kind: Kind}
	switch name {
	case BuiltinDefault:
		p.source = "default"
		p.Rules = []Rule{ruleAllPassed, ruleNotSimulated, ruleGPUStepsReal, ruleNoAmbiguousGate}
		if allowSimulated {
			p.Rules = []Rule{ruleAllPassed, ruleGPUStepsSimulated, ruleNoAmbiguousGate}
		}
		p.Coverage = &Coverage{Targets: true}
	case BuiltinCPUTier:
		p.source = BuiltinPrefix + BuiltinCPUTier
		p.Rules = []Rule{ruleAllPassed, ruleNotSimulated, ruleCPUTierCases, ruleNoAmbiguousGate}
		if allowSimulated {
			p.Rules = []Rule{ruleAllPassed, ruleCPUTierCases, ruleNoAmbiguousGate}
		}
	default:
		return nil, fmt.Errorf("policy %s%s: no such built-in policy\nhint: the built-in policies are %s%s and %s%s", BuiltinPrefix, name, BuiltinPrefix, BuiltinDefault, BuiltinPrefix, BuiltinCPUTier)
	}
	return p, nil
}

// Open returns the policy arg names: a built-in one (builtin:NAME, see
// Builtin) or a policy file (Load). allowSimulated applies to built-in
// policies only; a file's rules are its own.
func Open(arg string, allowSimulated bool) (*Policy, error) {
	if strings.HasPrefix(arg, BuiltinPrefix) {
		return Builtin(arg, allowSimulated)
	}
	return Load(arg)
}
