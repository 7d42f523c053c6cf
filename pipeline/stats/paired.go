package stats

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Comparison methods.
const (
	// MethodMannWhitney compares two pooled samples (a stored baseline and
	// a candidate): Mann-Whitney U and the Hodges-Lehmann shift over all
	// pairs of samples.
	MethodMannWhitney = "mann-whitney"
	// MethodPaired compares a candidate with a reference measured in the
	// same run, invocation by invocation: one log ratio per adjacent
	// (reference, candidate) pair of invocations, judged with the Wilcoxon
	// signed-rank test and the one-sample Hodges-Lehmann estimate (the
	// median of the Walsh averages) with its distribution-free interval.
	// The invocation is the unit, so drift between invocations (load,
	// clocks, neighbours) widens the interval instead of faking a
	// difference. Each side of a pair is represented by its fastest sample
	// among its first k, k the smaller side's count: timing noise only
	// ever adds time, and a process that was descheduled or shared its
	// core for part of an invocation still ran some iterations
	// undisturbed, which the median of that invocation does not show
	// (bench/stats measures both).
	MethodPaired = "paired-signed-rank"
)

// SignedRankResult is the outcome of a two-sided Wilcoxon signed-rank test
// of paired differences against a zero median.
type SignedRankResult struct {
	// N is the number of non-zero differences the test used.
	N int `json:"n"`
	// W is the sum of the ranks of the positive differences.
	W float64 `json:"w"`
	// Z is the normal score (tie- and continuity-corrected); zero when the
	// exact distribution was used.
	Z float64 `json:"z,omitempty"`
	// P is the two-sided p-value.
	P float64 `json:"p"`
	// Exact is true when P comes from the exact null distribution (no tied
	// magnitudes, N ≤ maxExactSignedRank).
	Exact bool `json:"exact"`
}

// maxExactSignedRank is the largest number of differences for which the
// exact null distribution of W is used.
const maxExactSignedRank = 60

// MaxPairs is the most pairs ComparePaired accepts: the Walsh averages grow
// with its square.
const MaxPairs = 2000

// SignedRank tests whether the differences d are centred on zero. Zero
// differences are dropped (Wilcoxon's rule); it returns P = 1 when none is
// left.
func SignedRank(d []float64) SignedRankResult {
	nz := make([]float64, 0, len(d))
	for _, v := range d {
		if v != 0 {
			nz = append(nz, v)
		}
	}
	n := len(nz)
	if n == 0 {
		return SignedRankResult{P: 1}
	}
	slices.SortFunc(nz, func(a, b float64) int {
		switch aa, bb := math.Abs(a), math.Abs(b); {
		case aa < bb:
			return -1
		case aa > bb:
			return 1
		}
		return 0
	})
	var w, tieTerm float64
	ties := false
	for i := 0; i < n; {
		j := i
		for j+1 < n && math.Abs(nz[j+1]) == math.Abs(nz[i]) {
			j++
		}
		if t := float64(j - i + 1); t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			if nz[k] > 0 {
				w += avg
			}
		}
		i = j + 1
	}
	res := SignedRankResult{N: n, W: w}
	if !ties && n <= maxExactSignedRank {
		dist := signedRankDist(n)
		k := int(math.Round(w))
		var lo, hi float64 // P(W ≤ w), P(W ≥ w)
		for i := 0; i <= k && i < len(dist); i++ {
			lo += dist[i]
		}
		for i := k; i < len(dist); i++ {
			hi += dist[i]
		}
		res.P, res.Exact = math.Min(1, 2*math.Min(lo, hi)), true
		return res
	}
	nf := float64(n)
	mu := nf * (nf + 1) / 4
	sigma2 := nf*(nf+1)*(2*nf+1)/24 - tieTerm/48
	if sigma2 <= 0 {
		res.P = 1
		return res
	}
	res.Z, res.P = normalTest(w, mu, sigma2)
	return res
}

var signedRankCache sync.Map // int -> []float64

// signedRankDist returns P(W = w) for w = 0..n(n+1)/2 under the null
// hypothesis: the number of subsets of {1..n} summing to w, over 2^n.
func signedRankDist(n int) []float64 {
	if d, ok := signedRankCache.Load(n); ok {
		return d.([]float64)
	}
	size := n*(n+1)/2 + 1
	c := make([]float64, size)
	c[0] = 1
	top := 0
	for k := 1; k <= n; k++ {
		top += k
		for s := top; s >= k; s-- {
			c[s] += c[s-k]
		}
	}
	scale := math.Ldexp(1, -n)
	for i := range c {
		c[i] *= scale
	}
	signedRankCache.Store(n, c)
	return c
}

// signedRankCDF returns P(W ≤ k) under the null hypothesis for n
// differences, exact for n ≤ maxExactSignedRank and from the normal
// approximation above.
func signedRankCDF(k, n int) float64 {
	if k < 0 {
		return 0
	}
	if n <= maxExactSignedRank {
		dist := signedRankDist(n)
		var p float64
		for i := 0; i <= k && i < len(dist); i++ {
			p += dist[i]
		}
		return math.Min(p, 1)
	}
	nf := float64(n)
	mu := nf * (nf + 1) / 4
	sd := math.Sqrt(nf * (nf + 1) * (2*nf + 1) / 24)
	return 0.5 * math.Erfc(-(float64(k)+0.5-mu)/(sd*math.Sqrt2))
}

// MinPairs is the fewest pairs with which the signed-rank test can reach
// significance at alpha: with n pairs the smallest two-sided p-value is
// 2^(1-n).
func MinPairs(alpha float64) int {
	n := 1
	for math.Ldexp(1, 1-n) >= alpha && n < MaxPairs {
		n++
	}
	return n
}

// WalshShift is the one-sample Hodges-Lehmann estimate of the centre of
// the differences d (the median of the Walsh averages (d_i + d_j) / 2,
// i ≤ j) with its confidence interval at level, from the order statistics
// of the Walsh averages at the signed-rank critical value. The interval is
// the full range, with Exact false, when d is too short for level.
func WalshShift(d []float64, level float64) (float64, Interval) {
	n := len(d)
	if n == 0 {
		return math.NaN(), Interval{Lo: math.NaN(), Hi: math.NaN(), Level: level}
	}
	walsh := make([]float64, 0, n*(n+1)/2)
	for i := range d {
		for j := i; j < n; j++ {
			walsh = append(walsh, (d[i]+d[j])/2)
		}
	}
	slices.Sort(walsh)
	m := len(walsh)
	est := quantileSorted(walsh, 0.5)
	// [w(k), w(m+1-k)] covers the centre with probability 1 - 2 P(W ≤ k-1).
	best, cov := 0, 0.0
	for k := 1; k <= (m+1)/2; k++ {
		c := 1 - 2*signedRankCDF(k-1, n)
		if c < level {
			break
		}
		best, cov = k, c
	}
	if best == 0 {
		return est, Interval{Lo: walsh[0], Hi: walsh[m-1], Level: level, Achieved: 1 - 2*signedRankCDF(0, n), Exact: false}
	}
	return est, Interval{Lo: walsh[best-1], Hi: walsh[m-best], Level: level, Achieved: cov, Exact: true}
}

// PairRatio is one pair's log ratio, candidate over reference: the log of
// the fastest candidate sample over the fastest reference sample, each
// among the first k samples of its invocation, k the smaller count (so
// that a side with more samples is not favoured by them).
func PairRatio(reference, candidate []float64) float64 {
	k := min(len(reference), len(candidate))
	return math.Log(slices.Min(candidate[:k])) - math.Log(slices.Min(reference[:k]))
}

// ComparePaired judges a candidate against a reference measured in the
// same run. reference[i] and candidate[i] are the samples of the i-th
// invocation of each side, in the order they were taken; the two
// invocations of a pair ran next to each other (in ABBA blocks), so each
// pair contributes one log ratio (see PairRatio). The verdict follows
// Compare's rules, with the signed-rank test for significance and the Walsh-average shift and its interval at level
// 1 - Alpha for the size of the change. Fewer pairs than MinPairs(Alpha)
// is Ambiguous: the test could not reach significance. An Ambiguous
// verdict says how many more pairs the current noise would need
// (MorePairs). ComparePaired is a fixed-size test, valid for one look at
// a number of pairs chosen in advance (rounds: N); a gate that looks
// after every pair uses ComparePairedSequential.
func ComparePaired(reference, candidate [][]float64, g Gate) (Comparison, error) {
	c, d, err := pairedRatios(reference, candidate, g)
	if err != nil || len(d) == 0 {
		return c, err
	}
	est, ci := WalshShift(d, 1-g.Alpha)
	c.Shift = Shift{Delta: math.Expm1(est), CI: Interval{Lo: math.Expm1(ci.Lo), Hi: math.Expm1(ci.Hi), Level: ci.Level, Achieved: ci.Achieved, Exact: ci.Exact}}
	sr := SignedRank(d)
	c.SignedRank = &sr
	if need := MinPairs(g.Alpha); len(d) < need {
		c.Verdict = Ambiguous
		c.Reason = fmt.Sprintf("too few pairs: %d pairs reach at best p=%.2g, not below alpha %g (need ≥ %d rounds; hint: raise rounds)", len(d), math.Ldexp(1, 1-len(d)), g.Alpha, need)
		return c, nil
	}
	judge(&c, sr.P, g)
	if c.Verdict == Ambiguous {
		c.Reason += moreClause(c, g)
	}
	return c, nil
}
