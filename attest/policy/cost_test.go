package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/policy"
)

// stepsPredicate is a passing validation predicate with n steps.
func stepsPredicate(n int) json.RawMessage {
	return predicateOf(n, `{"id":"s%d","kind":"test","verdict":"passed"}`)
}

// fullStepsPredicate is stepsPredicate with the facts of every step the
// default policy reads (gpu, backend, devices).
func fullStepsPredicate(n int) json.RawMessage {
	return predicateOf(n, `{"id":"s%d","kind":"test","verdict":"passed","gpu":false,"backend":"cpu","devices":[]}`)
}

func predicateOf(n int, stepFormat string) json.RawMessage {
	var sb strings.Builder
	sb.WriteString(`{"result":"passed","failed_steps":[],"simulated":false,"steps":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, stepFormat, i)
	}
	sb.WriteString("]}")
	return json.RawMessage(sb.String())
}

func compile(t *testing.T, rules ...string) *policy.Program {
	t.Helper()
	src := header + "rules:\n"
	for i, r := range rules {
		src += fmt.Sprintf("  - name: r%d\n    expr: '%s'\n", i, r)
	}
	p, err := policy.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := p.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// TestEvaluateLinear: evaluation time grows linearly with the predicate.
// cel-go's cost tracker made the default policy quadratic in the number
// of steps (4x the steps took 16x the time, a 4 MB predicate a minute).
func TestEvaluateLinear(t *testing.T) {
	t.Parallel()
	prog, err := policy.Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	// Each size is timed five times, the two interleaved so that a burst
	// of load on a shared machine falls on both; the fastest of each
	// counts. Linear is 4x; the quadratic tracker was 16x.
	once := func(pred []byte) (time.Duration, uint64) {
		start := time.Now()
		res, err := prog.Evaluate(t.Context(), policy.Input{Predicate: pred})
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !r.Passed {
				t.Fatalf("rule %q: %s", r.Name, r.Error)
			}
		}
		return d, res[0].Cost
	}
	smallPred, largePred := fullStepsPredicate(10_000), fullStepsPredicate(40_000)
	var small, large time.Duration
	var smallCost, largeCost uint64
	for range 5 {
		d, c := once(smallPred)
		if small == 0 || d < small {
			small, smallCost = d, c
		}
		d, c = once(largePred)
		if large == 0 || d < large {
			large, largeCost = d, c
		}
	}
	t.Logf("10000 steps (%d KiB): %s, cost %d; 40000 steps (%d KiB): %s, cost %d", len(smallPred)>>10, small, smallCost, len(largePred)>>10, large, largeCost)
	if ratio := float64(large) / float64(small); ratio > 12 {
		t.Errorf("4x the steps took %.1fx the time (%s vs %s)", ratio, large, small)
	}
	if ratio := float64(largeCost) / float64(smallCost); ratio < 3.9 || ratio > 4.1 {
		t.Errorf("4x the steps cost %.2fx (%d vs %d)", ratio, largeCost, smallCost)
	}
}

// TestCostLimit: a rule over the limit is an error, never "holds", and
// so is every rule after it on the same input.
func TestCostLimit(t *testing.T) {
	t.Parallel()
	prog := compile(t,
		`predicate.steps.all(s, predicate.steps.exists(t, t.id == s.id))`,
		`true`,
	)
	pred := stepsPredicate(2000)
	res, err := prog.Evaluate(t.Context(), policy.Input{Predicate: pred}, policy.WithCostLimit(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Passed || !r.CostLimitExceeded || !strings.Contains(r.Error, "cost limit exceeded") {
			t.Errorf("rule %q: passed=%v limit=%v error=%q", r.Name, r.Passed, r.CostLimitExceeded, r.Error)
		}
	}
	if res[0].Cost != 1_000_000 {
		t.Errorf("cost = %d, want the limit", res[0].Cost)
	}
	// Within the limit, the same rules hold.
	res, err = prog.Evaluate(t.Context(), policy.Input{Predicate: stepsPredicate(50)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Passed || r.Error != "" {
			t.Errorf("rule %q: passed=%v error=%q", r.Name, r.Passed, r.Error)
		}
	}
	if _, err := prog.Evaluate(t.Context(), policy.Input{Predicate: pred}, policy.WithCostLimit(0)); err == nil {
		t.Error("a zero cost limit was accepted")
	}
}

// TestCostCharges: sizes count where the work does: deep equality, long
// attribute chains, string concatenation.
func TestCostCharges(t *testing.T) {
	t.Parallel()
	big := `{"a":{"b":{"c":{"d":"` + strings.Repeat("x", 100_000) + `"}}},"l":[` + strings.Repeat(`{"k":"vvvvvvvvvv"},`, 10_000) + `{}]}`
	tests := []struct {
		expr    string
		atLeast uint64
	}{
		{`predicate.a == predicate.a`, 10_000},
		{`predicate.l == predicate.l`, 10_000},
		{`predicate.a.b.c.d + predicate.a.b.c.d != ""`, 20_000},
		{`predicate.l.all(x, true)`, 10_000},
		{`predicate.a.b.c.d.matches("^x+$")`, 10_000},
	}
	for _, tt := range tests {
		res, err := compile(t, tt.expr).Evaluate(t.Context(), policy.Input{Predicate: json.RawMessage(big)})
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Passed || res[0].Cost < tt.atLeast {
			t.Errorf("%s: passed=%v (%s), cost %d, want ≥ %d", tt.expr, res[0].Passed, res[0].Error, res[0].Cost, tt.atLeast)
		}
	}
}

// TestEvaluateCancelled: cancelling the context stops a long rule and
// Evaluate says so. The input is built before the clock starts, and the
// bound (a hang guard, not a speed target: the rule alone runs for
// minutes) is measured from the cancel, so a loaded machine does not fail it.
func TestEvaluateCancelled(t *testing.T) {
	t.Parallel()
	prog := compile(t, `predicate.steps.all(s, !predicate.steps.exists(t, t.id == "none"))`)
	in := policy.Input{Predicate: stepsPredicate(20_000)}
	ctx, cancel := context.WithCancel(t.Context())
	var cancelled atomic.Int64
	time.AfterFunc(100*time.Millisecond, func() {
		cancelled.Store(time.Now().UnixNano())
		cancel()
	})
	_, err := prog.Evaluate(ctx, in, policy.WithCostLimit(1<<62))
	if at := cancelled.Load(); at == 0 {
		t.Errorf("Evaluate returned before the cancel: err = %v", err)
	} else if took := time.Since(time.Unix(0, at)); took > 20*time.Second {
		t.Errorf("Evaluate returned %s after the cancel", took)
	}
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("err = %v, want context canceled", err)
	}
}
