package stats

import (
	"errors"
	"math"
	"slices"
)

// Shift is the Hodges-Lehmann estimate of the relative change from a
// baseline sample to a candidate sample: the median of all pairwise
// differences log(y) - log(x), turned back into a ratio minus one. A
// Delta of 0.05 means the candidate takes 5 % longer.
type Shift struct {
	// Delta is exp(HL) - 1.
	Delta float64 `json:"delta"`
	// CI is the distribution-free confidence interval of Delta, from the
	// order statistics of the pairwise differences at the Mann-Whitney
	// critical value.
	CI Interval `json:"ci"`
}

// HodgesLehmann estimates the relative shift from x (baseline) to y
// (candidate) with a confidence interval at level (e.g. 0.99). Samples
// must be positive (they are durations).
func HodgesLehmann(x, y []float64, level float64) (Shift, error) {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return Shift{}, ErrEmpty
	}
	lx := make([]float64, m)
	for i, v := range x {
		if !(v > 0) || math.IsInf(v, 0) {
			return Shift{}, errors.New("baseline sample holds a non-positive or non-finite value")
		}
		lx[i] = math.Log(v)
	}
	d := make([]float64, 0, m*n)
	for _, v := range y {
		if !(v > 0) || math.IsInf(v, 0) {
			return Shift{}, errors.New("candidate sample holds a non-positive or non-finite value")
		}
		ly := math.Log(v)
		for _, b := range lx {
			d = append(d, ly-b)
		}
	}
	slices.Sort(d)
	mn := len(d)
	est := quantileSorted(d, 0.5)
	// k-th smallest difference (1-based) bounds the interval:
	// k = floor(mn/2 - z * sqrt(mn(m+n+1)/12)), at least 1.
	z := NormalQuantile(1 - (1-level)/2)
	k := int(math.Floor(float64(mn)/2 - z*math.Sqrt(float64(mn)*float64(m+n+1)/12)))
	ci := Interval{Level: level, Achieved: level, Exact: true}
	if k < 1 {
		k = 1
		ci.Exact = false
		ci.Achieved = 0 // unknown: the samples are too small for the level
	}
	ci.Lo = math.Expm1(d[k-1])
	ci.Hi = math.Expm1(d[mn-k])
	return Shift{Delta: math.Expm1(est), CI: ci}, nil
}
