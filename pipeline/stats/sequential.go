package stats

import (
	"fmt"
	"math"
	"slices"
)

// MethodSequential compares a candidate with a same-run reference pair by
// pair, as MethodPaired does, but with an always-valid test, so that the
// comparison may be looked at after every pair and stop once it is
// decided (rounds: auto): a sign test of the pairs' log ratios whose
// evidence is a beta-binomial mixture martingale, and the confidence
// sequence of the ratios' median it yields. By Ville's inequality the
// chance that the sequence ever excludes the true median, at any of the
// looks, is at most Alpha, so stopping on the first decided look keeps
// the false-positive rate at Alpha however often the gate looks. The sign
// test assumes nothing of the ratios but that each pair's ratio is as
// likely above their common median as below it: load that changes between
// pairs (steps, ramps, bursts) widens the sequence, it does not fake a
// difference.
const MethodSequential = "paired-sign-sequential"

// signPrior is the parameter a of the Beta(a, a) mixing distribution over
// the chance that a ratio lies above the tested median: a = 1/2 (the
// Krichevsky-Trofimov mixture) lets ten unanimous pairs decide at alpha
// 0.01, and its cost grows like log(n)/2 for the n pairs a small change
// needs.
const signPrior = 0.5

// SequentialResult is the always-valid sign test of the pairs' log ratios
// against a zero median.
type SequentialResult struct {
	// N is the number of non-zero ratios the test used; Above of them
	// are above zero (the candidate slower).
	N     int `json:"n"`
	Above int `json:"above"`
	// E is the mixture martingale's value at zero: the evidence against
	// "no change", which a decision needs to exceed 1/Alpha.
	E float64 `json:"e"`
	// P is the anytime-valid p-value, min(1, 1/E).
	P float64 `json:"p"`
}

// signLogE is the log of the beta-binomial mixture martingale after n
// signs of which above are positive: the Beta(a, a)-weighted likelihood
// of the signs over their likelihood at one half.
func signLogE(above, n int) float64 {
	a := signPrior
	lb := func(x, y float64) float64 {
		gx, _ := math.Lgamma(x)
		gy, _ := math.Lgamma(y)
		gxy, _ := math.Lgamma(x + y)
		return gx + gy - gxy
	}
	return lb(a+float64(above), a+float64(n-above)) - lb(a, a) + float64(n)*math.Ln2
}

// signBound returns the largest k (0 ≤ k ≤ n/2) such that k or fewer
// signs of n on one side are evidence of at least 1/alpha: the confidence
// sequence of the median after n ratios is [d(k), d(n+1-k)] of their order
// statistics, unbounded when k is 0.
func signBound(n int, alpha float64) int {
	lim := math.Log(1 / alpha)
	k := 0
	for s := 0; 2*s <= n; s++ {
		if signLogE(s, n) < lim {
			break
		}
		k = s + 1
	}
	return k
}

// MinSequentialPairs is the fewest pairs with which the sequential sign
// test can decide anything at alpha: ratios all on one side must be
// evidence of 1/alpha.
func MinSequentialPairs(alpha float64) int {
	for n := 1; n < MaxPairs; n++ {
		if signBound(n, alpha) > 0 {
			return n
		}
	}
	return MaxPairs
}

// ComparePairedSequential judges a candidate against a same-run
// reference, pair by pair, with MethodSequential: reference[i] and
// candidate[i] are the samples of the i-th pair's invocations (see
// ComparePaired), each pair one log ratio (PairRatio). The shift is the
// median ratio and its interval the confidence sequence at level 1 -
// Alpha. Before the budget ends (final false) a case is decided only when
// the sequence settles it: Slower or Faster when it excludes no change
// and the median is beyond the threshold, Same when it lies within ±
// Threshold; anything else is Ambiguous, to be sampled further. At the
// end of the budget (final true) the verdict follows Compare's rules (a
// significant change within the threshold is Same too); an Ambiguous
// verdict then says how many more pairs the current noise would need.
func ComparePairedSequential(reference, candidate [][]float64, g Gate, final bool) (Comparison, error) {
	c, d, err := pairedRatios(reference, candidate, g)
	if err != nil || len(d) == 0 {
		return c, err
	}
	c.Method = MethodSequential
	slices.Sort(d)
	n := len(d)
	est := quantileSorted(d, 0.5)
	k := signBound(n, g.Alpha)
	ci := Interval{Lo: d[0], Hi: d[n-1], Level: 1 - g.Alpha, Achieved: 1 - g.Alpha}
	if k > 0 {
		ci.Lo, ci.Hi, ci.Exact = d[k-1], d[n-k], true
	}
	c.Shift = Shift{Delta: math.Expm1(est), CI: Interval{Lo: math.Expm1(ci.Lo), Hi: math.Expm1(ci.Hi), Level: ci.Level, Achieved: ci.Achieved, Exact: ci.Exact}}
	sr := SequentialResult{}
	for _, v := range d {
		if v != 0 {
			sr.N++
		}
		if v > 0 {
			sr.Above++
		}
	}
	sr.E = math.Exp(signLogE(sr.Above, sr.N))
	sr.P = math.Min(1, 1/sr.E)
	c.Sequential = &sr
	if k == 0 {
		c.Verdict = Ambiguous
		c.Reason = fmt.Sprintf("too few pairs: %d pairs cannot exclude anything at alpha %g (the sequential test needs ≥ %d)", n, g.Alpha, MinSequentialPairs(g.Alpha))
		if final {
			c.Reason += "; hint: raise maxRounds or the time budget (roundsTime)"
		}
		return c, nil
	}
	if !final {
		sh, sig := c.Shift, sr.P < g.Alpha
		switch {
		case sig && (sh.Delta > g.Threshold || sh.Delta < -g.Threshold),
			sh.CI.Lo >= -g.Threshold && sh.CI.Hi <= g.Threshold:
			judge(&c, sr.P, g)
			return c, nil
		}
		c.Verdict = Ambiguous
		c.Reason = fmt.Sprintf("undecided after %d pairs: %+.2f%% [%+.2f%%, %+.2f%%] against the %.2f%% threshold", n, 100*sh.Delta, 100*sh.CI.Lo, 100*sh.CI.Hi, 100*g.Threshold)
		return c, nil
	}
	judge(&c, sr.P, g)
	if c.Verdict == Ambiguous {
		c.Reason += moreClause(c, g)
	}
	return c, nil
}

// pairedRatios checks a paired comparison's input and returns the
// comparison's sample counts and medians with the pairs' log ratios.
func pairedRatios(reference, candidate [][]float64, g Gate) (Comparison, []float64, error) {
	if g.Threshold < 0 || g.Alpha <= 0 || g.Alpha >= 1 {
		return Comparison{}, nil, fmt.Errorf("gate: threshold %v must be ≥ 0 and alpha %v in (0, 1)", g.Threshold, g.Alpha)
	}
	if len(reference) != len(candidate) {
		return Comparison{}, nil, fmt.Errorf("paired comparison: %d reference invocations but %d candidate invocations", len(reference), len(candidate))
	}
	if len(reference) > MaxPairs {
		return Comparison{}, nil, fmt.Errorf("paired comparison: %d pairs, more than the %d supported", len(reference), MaxPairs)
	}
	c := Comparison{Method: MethodPaired, Pairs: len(reference)}
	var allRef, allCand []float64
	d := make([]float64, 0, len(reference))
	for i := range reference {
		r, k := reference[i], candidate[i]
		if len(r) == 0 || len(k) == 0 {
			return Comparison{}, nil, fmt.Errorf("pair %d: an invocation has no samples (reference n=%d, candidate n=%d)", i+1, len(r), len(k))
		}
		for _, v := range slices.Concat(r, k) {
			if !(v > 0) || math.IsInf(v, 0) {
				return Comparison{}, nil, fmt.Errorf("pair %d: a sample is not a positive finite duration", i+1)
			}
		}
		allRef = append(allRef, r...)
		allCand = append(allCand, k...)
		d = append(d, PairRatio(r, k))
	}
	c.BaselineN, c.CandidateN = len(allRef), len(allCand)
	if len(d) == 0 {
		c.Verdict = Ambiguous
		c.Reason = "no pairs of invocations"
		return c, nil, nil
	}
	c.BaselineMedian, c.CandidateMedian = Median(allRef), Median(allCand)
	c.MedianDelta = c.CandidateMedian/c.BaselineMedian - 1
	return c, d, nil
}

// maxMorePairs caps MorePairs' estimate: beyond it the answer is "more
// than".
const maxMorePairs = 100000

// MorePairs estimates how many more pairs an Ambiguous paired comparison
// would need, at the noise its interval shows, to be decided: its
// interval's half-width, on the log scale, shrinks like one over the
// square root of the pairs, and must shrink to the distance between the
// estimate and the nearest boundary that decides it (zero for a change
// beyond the threshold, the threshold for one within it). ok is false
// when no estimate can be made: no interval yet, or an estimate on the
// threshold itself.
func MorePairs(c Comparison, g Gate) (more int, ok bool) {
	sh := c.Shift
	if c.Pairs == 0 || !sh.CI.Exact || sh.CI.Lo <= -1 || sh.Delta <= -1 {
		return 0, false
	}
	est, lo, hi := math.Log1p(sh.Delta), math.Log1p(sh.CI.Lo), math.Log1p(sh.CI.Hi)
	half := (hi - lo) / 2
	up, down := math.Log1p(g.Threshold), -math.Log1p(g.Threshold)
	var need float64
	switch {
	case est > up || est < down:
		need = math.Abs(est) // exclude zero
	default:
		need = math.Min(up-est, est-down) // inside ±threshold
	}
	if !(need > 0) || !(half > 0) {
		return 0, false
	}
	total := float64(c.Pairs) * (half / need) * (half / need)
	if total > maxMorePairs {
		return maxMorePairs, true
	}
	return max(1, int(math.Ceil(total))-c.Pairs), true
}

// moreClause is the "; about N more pairs" sentence of an Ambiguous
// verdict.
func moreClause(c Comparison, g Gate) string {
	switch n, ok := MorePairs(c, g); {
	case !ok:
		return "; the estimate sits on the threshold: no number of pairs at this noise can be named"
	case n >= maxMorePairs:
		return fmt.Sprintf("; the current noise would need more than %d more pairs", maxMorePairs)
	default:
		return fmt.Sprintf("; the current noise would need about %d more pairs", n)
	}
}
