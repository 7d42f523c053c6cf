package stats

import (
	"fmt"
	"math"
)

// Verdict is the gate's judgement of one case.
type Verdict string

// The verdicts. Only Slower (and Missing) fails a gate.
const (
	// Same: no change beyond the threshold.
	Same Verdict = "SAME"
	// Faster: significantly faster by more than the threshold.
	Faster Verdict = "FASTER"
	// Slower: significantly slower by more than the threshold.
	Slower Verdict = "SLOWER"
	// Ambiguous: the data cannot tell (too few samples, or too noisy for
	// the threshold); never read as Same.
	Ambiguous Verdict = "AMBIGUOUS"
	// Missing: the case is in the baseline (or the reference) but not in
	// the candidate; it fails the gate (a case that vanished cannot pass).
	Missing Verdict = "MISSING"
	// New: the case is only in the candidate; informational.
	New Verdict = "NEW"
)

// MinSamples is the fewest samples a side for any verdict but Ambiguous.
const MinSamples = 10

// Default gate settings.
const (
	DefaultThreshold = 0.03
	DefaultAlpha     = 0.01
)

// Gate holds the regression gate's settings.
type Gate struct {
	// Threshold is the smallest relative change that counts (0.03 = 3 %).
	Threshold float64 `json:"threshold"`
	// Alpha is the significance level of the Mann-Whitney test; the delta
	// interval is reported at level 1 - Alpha.
	Alpha float64 `json:"alpha"`
}

// Comparison is the gate's full account of one case.
type Comparison struct {
	// Method is how the sides were compared: MethodMannWhitney for two
	// pooled samples, MethodPaired for a same-run reference.
	Method string `json:"method,omitempty"`
	// Pairs is the number of (reference, candidate) invocation pairs
	// (MethodPaired).
	Pairs int `json:"pairs,omitempty"`
	// BaselineN and CandidateN are the sample sizes.
	BaselineN  int `json:"baseline_n"`
	CandidateN int `json:"candidate_n"`
	// BaselineMedian and CandidateMedian are the sample medians.
	BaselineMedian  float64 `json:"baseline_median"`
	CandidateMedian float64 `json:"candidate_median"`
	// MedianDelta is CandidateMedian / BaselineMedian - 1.
	MedianDelta float64 `json:"median_delta"`
	// Shift is the Hodges-Lehmann relative shift with its interval; the
	// verdict uses it.
	Shift Shift `json:"shift"`
	// Test is the Mann-Whitney U test (MethodMannWhitney).
	Test *MannWhitneyResult `json:"mann_whitney,omitempty"`
	// SignedRank is the Wilcoxon signed-rank test of the pairs' log ratios
	// (MethodPaired).
	SignedRank *SignedRankResult `json:"signed_rank,omitempty"`
	// Sequential is the always-valid sign test of the pairs' log ratios
	// (MethodSequential).
	Sequential *SequentialResult `json:"sequential,omitempty"`
	// Verdict is the judgement; Reason says why in one line.
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
}

// Compare judges candidate timings against baseline timings, two pooled
// samples (MethodMannWhitney): fewer than MinSamples on either side is
// Ambiguous; otherwise the Mann-Whitney p-value and the Hodges-Lehmann
// shift decide as judge says.
func Compare(baseline, candidate []float64, g Gate) (Comparison, error) {
	if g.Threshold < 0 || g.Alpha <= 0 || g.Alpha >= 1 {
		return Comparison{}, fmt.Errorf("gate: threshold %v must be ≥ 0 and alpha %v in (0, 1)", g.Threshold, g.Alpha)
	}
	c := Comparison{Method: MethodMannWhitney, BaselineN: len(baseline), CandidateN: len(candidate)}
	if len(baseline) == 0 || len(candidate) == 0 {
		c.Verdict = Ambiguous
		c.Reason = fmt.Sprintf("no samples (baseline n=%d, candidate n=%d)", len(baseline), len(candidate))
		return c, nil
	}
	c.BaselineMedian = Median(baseline)
	c.CandidateMedian = Median(candidate)
	if c.BaselineMedian != 0 {
		c.MedianDelta = c.CandidateMedian/c.BaselineMedian - 1
	}
	sh, err := HodgesLehmann(baseline, candidate, 1-g.Alpha)
	if err != nil {
		return Comparison{}, err
	}
	c.Shift = sh
	mw := MannWhitney(candidate, baseline)
	c.Test = &mw
	if c.BaselineN < MinSamples || c.CandidateN < MinSamples {
		c.Verdict = Ambiguous
		c.Reason = fmt.Sprintf("too few samples (baseline n=%d, candidate n=%d; need ≥ %d a side)", c.BaselineN, c.CandidateN, MinSamples)
		return c, nil
	}
	judge(&c, mw.P, g)
	return c, nil
}

// P returns the p-value the verdict used, NaN when no test ran.
func (c *Comparison) P() float64 {
	switch {
	case c.Sequential != nil:
		return c.Sequential.P
	case c.SignedRank != nil:
		return c.SignedRank.P
	case c.Test != nil:
		return c.Test.P
	}
	return math.NaN()
}

// judge sets c's verdict and reason from its shift, the test's p-value and
// the gate:
//
//   - p < Alpha and shift > Threshold: Slower; p < Alpha and shift <
//     -Threshold: Faster;
//   - |shift| ≤ Threshold and either significant or with its interval
//     inside ±Threshold: Same;
//   - anything else (not significant, yet the interval reaches past the
//     threshold): Ambiguous.
func judge(c *Comparison, p float64, g Gate) {
	sh := c.Shift
	pct := func(v float64) string { return fmt.Sprintf("%+.2f%%", 100*v) }
	thr := fmt.Sprintf("%.2f%%", 100*g.Threshold)
	ci := fmt.Sprintf("[%s, %s]", pct(sh.CI.Lo), pct(sh.CI.Hi))
	sig := p < g.Alpha
	switch {
	case sig && sh.Delta > g.Threshold:
		c.Verdict = Slower
		c.Reason = fmt.Sprintf("slower by %s %s, p=%.2g < %g, beyond the %s threshold", pct(sh.Delta), ci, p, g.Alpha, thr)
	case sig && sh.Delta < -g.Threshold:
		c.Verdict = Faster
		c.Reason = fmt.Sprintf("faster by %s %s, p=%.2g < %g", pct(-sh.Delta), ci, p, g.Alpha)
	case math.Abs(sh.Delta) <= g.Threshold && (sig || (sh.CI.Lo >= -g.Threshold && sh.CI.Hi <= g.Threshold)):
		c.Verdict = Same
		if sig {
			c.Reason = fmt.Sprintf("changed by %s %s (p=%.2g), within the %s threshold", pct(sh.Delta), ci, p, thr)
		} else {
			c.Reason = fmt.Sprintf("no significant change: %s %s, p=%.2g", pct(sh.Delta), ci, p)
		}
	default:
		hint := "more repeats or a quieter machine"
		if c.Method == MethodPaired || c.Method == MethodSequential {
			hint = "more rounds or a quieter machine"
		}
		c.Verdict = Ambiguous
		c.Reason = fmt.Sprintf("inconclusive: %s %s, p=%.2g; the interval reaches past the %s threshold (hint: %s)", pct(sh.Delta), ci, p, thr, hint)
	}
}
