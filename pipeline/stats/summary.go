package stats

import (
	"errors"
	"math"
	"slices"
)

// Summary describes one sample of timings (any unit; the caller says which).
type Summary struct {
	// N is the number of samples.
	N int `json:"n"`
	// Min is the smallest sample.
	Min float64 `json:"min"`
	// Median is the 50th percentile.
	Median float64 `json:"median"`
	// Mean is the arithmetic mean.
	Mean float64 `json:"mean"`
	// Stddev is the sample standard deviation (n-1 denominator); zero for n < 2.
	Stddev float64 `json:"stddev"`
	// CV is Stddev / Mean.
	CV float64 `json:"cv"`
	// P95 is the 95th percentile.
	P95 float64 `json:"p95"`
	// P99 is the 99th percentile.
	P99 float64 `json:"p99"`
	// Max is the largest sample.
	Max float64 `json:"max"`
	// MedianCI is the distribution-free confidence interval of the median.
	MedianCI Interval `json:"median_ci"`
}

// Interval is a two-sided confidence interval.
type Interval struct {
	// Lo and Hi bound the interval.
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	// Level is the nominal coverage (0.95); Achieved is the coverage the
	// chosen order statistics really give, which is at least Level unless
	// the sample is too small, when Exact is false.
	Level    float64 `json:"level"`
	Achieved float64 `json:"achieved"`
	// Exact is false when the sample is too small to reach Level and the
	// interval is the sample's full range.
	Exact bool `json:"exact"`
}

// ErrEmpty is returned for an empty sample.
var ErrEmpty = errors.New("empty sample")

// Summarize computes the summary of xs with a 95 % median interval.
// It returns ErrEmpty for no samples and an error for NaN or infinite ones.
func Summarize(xs []float64) (Summary, error) {
	if len(xs) == 0 {
		return Summary{}, ErrEmpty
	}
	s := slices.Clone(xs)
	for _, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Summary{}, errors.New("sample holds NaN or Inf")
		}
	}
	slices.Sort(s)
	n := len(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range s {
		ss += (v - mean) * (v - mean)
	}
	sd := 0.0
	if n > 1 {
		sd = math.Sqrt(ss / float64(n-1))
	}
	cv := 0.0
	if mean != 0 {
		cv = sd / mean
	}
	return Summary{
		N:        n,
		Min:      s[0],
		Median:   quantileSorted(s, 0.5),
		Mean:     mean,
		Stddev:   sd,
		CV:       cv,
		P95:      quantileSorted(s, 0.95),
		P99:      quantileSorted(s, 0.99),
		Max:      s[n-1],
		MedianCI: medianCISorted(s, 0.95),
	}, nil
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of xs by linear interpolation
// between order statistics (Hyndman-Fan type 7, the default of R and NumPy).
// It returns NaN for an empty sample.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantileSorted(s, q)
}

// Median returns the median of xs (NaN when empty).
func Median(xs []float64) float64 { return Quantile(xs, 0.5) }

func quantileSorted(s []float64, q float64) float64 {
	q = math.Max(0, math.Min(1, q))
	h := float64(len(s)-1) * q
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-lo)*(s[i+1]-s[i])
}

// MedianCI returns the distribution-free confidence interval of the median
// of xs at the given level (e.g. 0.95): the order statistics x(j) and x(k)
// with P(j ≤ B < k) ≥ level for B ~ Binomial(n, 1/2), chosen as narrow and
// as symmetric as possible.
func MedianCI(xs []float64, level float64) Interval {
	if len(xs) == 0 {
		return Interval{Lo: math.NaN(), Hi: math.NaN(), Level: level}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return medianCISorted(s, level)
}

func medianCISorted(s []float64, level float64) Interval {
	n := len(s)
	// Symmetric choice: lower index j (1-based), upper n+1-j. Coverage is
	// P(j ≤ B ≤ n-j) = 1 - 2 P(B ≤ j-1); P(B ≤ j-1) is summed as j grows,
	// so the search is linear in n.
	best := 0
	bestCov := 0.0
	lnHalfN := float64(n) * math.Ln2
	var cdf float64 // P(B ≤ j-1)
	for j := 1; j <= n/2; j++ {
		cdf = math.Min(1, cdf+math.Exp(lnChoose(n, j-1)-lnHalfN))
		cov := 1 - 2*cdf
		if cov < level {
			break
		}
		best, bestCov = j, cov
	}
	if best == 0 {
		return Interval{Lo: s[0], Hi: s[n-1], Level: level, Achieved: 1 - 2*math.Pow(0.5, float64(n)), Exact: false}
	}
	return Interval{Lo: s[best-1], Hi: s[n-best], Level: level, Achieved: bestCov, Exact: true}
}

func lnChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// StopLevel is the confidence level of adaptive repeats' stopping rule.
const StopLevel = 0.95

// MedianPrecision is the half-width of the StopLevel interval of the
// median of xs, relative to the median: adaptive repeats stop a case once
// it is at most the requested precision. It is +Inf for a sample too
// small for an exact interval.
func MedianPrecision(xs []float64) float64 {
	if len(xs) == 0 {
		return math.Inf(1)
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	ci := medianCISorted(s, StopLevel)
	m := quantileSorted(s, 0.5)
	if !ci.Exact || !(m > 0) {
		return math.Inf(1)
	}
	return (ci.Hi - ci.Lo) / 2 / m
}
