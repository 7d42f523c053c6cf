package stats

import (
	"math"
	"slices"
	"sync"
)

// MannWhitneyResult is the outcome of a two-sided Mann-Whitney U test.
type MannWhitneyResult struct {
	// U is the statistic of the first sample: the number of pairs (x, y)
	// with x > y, ties counting one half.
	U float64 `json:"u"`
	// Z is the normal score (continuity- and tie-corrected); zero when the
	// exact distribution was used.
	Z float64 `json:"z,omitempty"`
	// P is the two-sided p-value.
	P float64 `json:"p"`
	// Exact is true when P comes from the exact null distribution of U
	// (no ties, both samples of at most maxExact), false for the normal
	// approximation.
	Exact bool `json:"exact"`
}

// maxExact is the largest sample size for which the exact null
// distribution is used.
const maxExact = 100

// MannWhitney tests whether x and y come from the same distribution
// against a two-sided shift alternative. It returns P = 1 when either
// sample is empty.
func MannWhitney(x, y []float64) MannWhitneyResult {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return MannWhitneyResult{P: 1}
	}
	type obs struct {
		v     float64
		first bool
	}
	all := make([]obs, 0, m+n)
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(a, b obs) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	N := m + n
	var rankSumX, tieTerm float64
	ties := false
	for i := 0; i < N; {
		j := i
		for j+1 < N && all[j+1].v == all[i].v {
			j++
		}
		t := float64(j - i + 1)
		if t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		avg := float64(i+j)/2 + 1 // ranks are 1-based
		for k := i; k <= j; k++ {
			if all[k].first {
				rankSumX += avg
			}
		}
		i = j + 1
	}
	u := rankSumX - float64(m)*float64(m+1)/2
	if !ties && m <= maxExact && n <= maxExact {
		dist := exactUDist(m, n)
		k := int(math.Round(u))
		var lo, hi float64 // P(U ≤ u), P(U ≥ u)
		for i := 0; i <= k && i < len(dist); i++ {
			lo += dist[i]
		}
		for i := k; i < len(dist); i++ {
			hi += dist[i]
		}
		return MannWhitneyResult{U: u, P: math.Min(1, 2*math.Min(lo, hi)), Exact: true}
	}
	mu := float64(m) * float64(n) / 2
	sigma2 := float64(m) * float64(n) / 12 * (float64(N+1) - tieTerm/(float64(N)*float64(N-1)))
	if sigma2 <= 0 { // every value tied: no evidence of a shift
		return MannWhitneyResult{U: u, P: 1}
	}
	z, p := normalTest(u, mu, sigma2)
	return MannWhitneyResult{U: u, Z: z, P: p, Exact: false}
}

var exactCache sync.Map // [2]int -> []float64

// exactUDist returns P(U = u) for u = 0..m*n under the null hypothesis,
// from the Gaussian binomial coefficient [m+n choose m]_q, whose
// coefficients count the arrangements giving each U.
func exactUDist(m, n int) []float64 {
	if m > n {
		m, n = n, m // the distribution is symmetric in the sizes
	}
	key := [2]int{m, n}
	if d, ok := exactCache.Load(key); ok {
		return d.([]float64)
	}
	size := m*n + 1
	c := make([]float64, size)
	c[0] = 1
	deg := 0
	// [n+i choose i]_q = [n+i-1 choose i-1]_q * (1 - q^(n+i)) / (1 - q^i)
	for i := 1; i <= m; i++ {
		a := n + i
		newDeg := deg + n
		for k := min(newDeg, size-1); k >= a; k-- {
			c[k] -= c[k-a]
		}
		for k := i; k <= newDeg; k++ {
			c[k] += c[k-i]
		}
		deg = newDeg
	}
	var total float64
	for k := range c {
		if c[k] < 0 { // rounding in the cancellation
			c[k] = 0
		}
		total += c[k]
	}
	for k := range c {
		c[k] /= total
	}
	exactCache.Store(key, c)
	return c
}

// normalTest is the two-sided normal approximation of a rank statistic
// stat with null mean mu and variance sigma2, continuity-corrected: its
// z-score and p-value.
func normalTest(stat, mu, sigma2 float64) (z, p float64) {
	d := stat - mu
	switch {
	case d > 0.5:
		d -= 0.5
	case d < -0.5:
		d += 0.5
	default:
		d = 0
	}
	z = d / math.Sqrt(sigma2)
	return z, math.Min(1, math.Erfc(math.Abs(z)/math.Sqrt2))
}

// NormalQuantile returns the p-quantile of the standard normal
// distribution (0 < p < 1).
func NormalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }
