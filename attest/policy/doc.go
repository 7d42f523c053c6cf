// Package policy loads verification policies and evaluates them over a
// verified in-toto statement.
//
// A policy is a YAML file (schema: schemas/policy.schema.json):
//
//	apiVersion: gpuattest.dev/v1
//	kind: Policy
//	rules:
//	  - name: all GPUs are sm_90
//	    expr: predicate.hardware.gpus.all(g, g.compute_capability == "9.0")
//	    message: the kernels must be validated on Hopper
//
// Each rule is a CEL expression (github.com/google/cel-go) that must
// evaluate to true. It sees five variables: predicate (the predicate as a
// JSON object), subjects (the statement's subjects: name and digest),
// predicateType (a string), gpuEvidence (the verifier's verdict on each
// GPU's signed evidence, GPUEvidence: empty when the statement carries
// none) and coverage (predicate.coverage: the coverage totals of the
// run's test steps, lines, lines_found, lines_hit and branches where
// given, so that "coverage.lines >= 0.8" gates; an empty map, on which
// that rule fails, when the run measured none). Numbers compare across int and double, so
// "b.throughput.value >= 2800" works on JSON numbers. Without a policy file
// the verifier applies Default: every step passed, the hardware was not
// simulated, every gpu: true step ran with backend cuda on real GPUs, and
// every pinned target is covered by a passing GPU run of its compute
// capability across all the bundles verified together (Coverage, which a
// policy file asks for with "coverage: {targets: true}"). Builtin names
// the built-in policies (default, cpu-tier) and their variants that
// accept simulated hardware; Open takes builtin:NAME or a file.
//
// Evaluation is bounded and linear in the size of the predicate. Each
// call of Program.Evaluate may cost at most DefaultCostLimit units (or
// WithCostLimit's), counted as cel-go's runtime cost model counts them:
// one per identifier, field selection, operator and call, strings, lists
// and regular expressions by their size, comparisons of lists and maps
// by their size in depth. A rule stopped by the limit is reported with
// CostLimitExceeded and an error, never as holding. The context is
// checked while rules run: cancelling it stops a rule within
// milliseconds. (cel-go's own cel.CostLimit tracker is not used: it makes
// comprehensions quadratic in the length of the list they range over.)
package policy
