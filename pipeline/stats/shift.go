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
//
// The m·n pairwise differences are never built: their order statistics
// are selected from the two sorted samples (selection in a sorted matrix,
// as in Monahan's algorithm for the Hodges-Lehmann estimator), in
// O((m+n) log(m+n)) time and O(m+n) memory, so a million samples a side
// take a fraction of a second.
func HodgesLehmann(x, y []float64, level float64) (Shift, error) {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return Shift{}, ErrEmpty
	}
	lx, err := sortedLogs(x, "baseline")
	if err != nil {
		return Shift{}, err
	}
	ly, err := sortedLogs(y, "candidate")
	if err != nil {
		return Shift{}, err
	}
	d := newDiffMatrix(lx, ly)
	mn := int64(m) * int64(n)
	// The median, as quantileSorted would interpolate it (type 7).
	h := float64(mn-1) * 0.5
	lo := int64(math.Floor(h))
	est := d.kth(lo)
	if frac := h - float64(lo); frac > 0 {
		est += frac * (d.kth(lo+1) - est)
	}
	// k-th smallest difference (1-based) bounds the interval:
	// k = floor(mn/2 - z * sqrt(mn(m+n+1)/12)), at least 1.
	z := NormalQuantile(1 - (1-level)/2)
	k := int64(math.Floor(float64(mn)/2 - z*math.Sqrt(float64(mn)*float64(m+n+1)/12)))
	ci := Interval{Level: level, Achieved: level, Exact: true}
	if k < 1 {
		k = 1
		ci.Exact = false
		ci.Achieved = 0 // unknown: the samples are too small for the level
	}
	ci.Lo = math.Expm1(d.kth(k - 1))
	ci.Hi = math.Expm1(d.kth(mn - k))
	return Shift{Delta: math.Expm1(est), CI: ci}, nil
}

// sortedLogs returns the logs of xs, sorted; every value must be a
// positive finite duration.
func sortedLogs(xs []float64, side string) ([]float64, error) {
	out := make([]float64, len(xs))
	for i, v := range xs {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, errors.New(side + " sample holds a non-positive or non-finite value")
		}
		out[i] = math.Log(v)
	}
	slices.Sort(out)
	return out, nil
}

// diffMatrix is the implicit matrix of differences y[j] - x[i] of two
// ascending samples: each row (fixed i) ascends in j, each column (fixed
// j) descends in i. It holds the per-row buffers selection reuses.
type diffMatrix struct {
	x, y   []float64
	lo, hi []int32    // candidate window of each row
	rows   [4][]int32 // per-row counts at the two pivots
	cum    []int64    // cumulative window widths
	sample []float64
}

func newDiffMatrix(x, y []float64) *diffMatrix {
	m := len(x)
	d := &diffMatrix{x: x, y: y, lo: make([]int32, m), hi: make([]int32, m), cum: make([]int64, m+1), sample: make([]float64, pivotSample)}
	for i := range d.rows {
		d.rows[i] = make([]int32, m)
	}
	return d
}

// countLE returns, for threshold t, the number of differences ≤ t (le)
// and < t (lt), and fills leRow[i] and ltRow[i] with the per-row counts.
// It walks both samples once: as x[i] grows, so does the bound y[j] ≤
// t + x[i].
func (d *diffMatrix) count(t float64, leRow, ltRow []int32) (le, lt int64) {
	n := len(d.y)
	jl, jt := 0, 0
	for i, xi := range d.x {
		for jl < n && d.y[jl]-xi <= t {
			jl++
		}
		for jt < n && d.y[jt]-xi < t {
			jt++
		}
		leRow[i], ltRow[i] = int32(jl), int32(jt)
		le += int64(jl)
		lt += int64(jt)
	}
	return le, lt
}

// kth returns the k-th smallest difference, counting from 0. Each row
// keeps a window [lo, hi) of candidate columns. Every round draws a
// sample of the candidates, takes from it two pivots that bracket the
// target rank (Floyd and Rivest's selection), counts the differences
// below each in one walk of the two samples, and keeps only the
// candidates between them: each round shrinks the candidates by a factor
// of about a hundred, so a few rounds of O(m+n) suffice. Pivots come from
// a fixed-seed generator, so the result, and its cost, are reproducible.
func (d *diffMatrix) kth(k int64) float64 {
	m, n := len(d.x), len(d.y)
	lo, hi, rows, cum := d.lo, d.hi, d.rows, d.cum
	for i := range hi {
		lo[i], hi[i] = 0, int32(n)
	}
	rng := splitmix(uint64(k) + 0x9e3779b97f4a7c15)
	for {
		var below int64
		for i := range lo {
			cum[i+1] = cum[i] + int64(hi[i]-lo[i])
			below += int64(lo[i])
		}
		total := cum[m]
		if total <= max(4096, int64(m+n)/16) {
			cand := make([]float64, 0, total)
			for i, xi := range d.x {
				for j := lo[i]; j < hi[i]; j++ {
					cand = append(cand, d.y[j]-xi)
				}
			}
			slices.Sort(cand)
			return cand[k-below]
		}
		lower, upper := d.pivots(k-below, total, rng)
		le1, lt1 := d.count(lower, rows[0], rows[1])
		le2, lt2 := d.count(upper, rows[2], rows[3])
		switch {
		case lt1 <= k && k < le1:
			return lower
		case lt2 <= k && k < le2:
			return upper
		case k < lt1: // below the lower pivot (the sample missed)
			narrow(lo, hi, nil, rows[1])
		case k >= le2: // above the upper pivot
			narrow(lo, hi, rows[2], nil)
		default: // strictly between the pivots
			narrow(lo, hi, rows[0], rows[3])
		}
	}
}

// pivotSample is how many candidates a selection round draws.
const pivotSample = 10000

// pivots draws a sample of the candidates and returns two of its values
// that bracket rank r (0-based, among total candidates) with high
// probability.
func (d *diffMatrix) pivots(r, total int64, rng *splitmixRNG) (float64, float64) {
	const size = pivotSample
	lo, cum, sample := d.lo, d.cum, d.sample
	for s := range sample {
		u := int64(rng.next() % uint64(total))
		i, _ := slices.BinarySearch(cum, u+1) // first row whose cumulative end exceeds u
		i--
		for cum[i+1] <= u {
			i++
		}
		sample[s] = d.y[int64(lo[i])+u-cum[i]] - d.x[i]
	}
	slices.Sort(sample)
	at := float64(r) / float64(total) * size
	spread := 3 * math.Sqrt(size)
	a := int(math.Max(0, math.Floor(at-spread)))
	b := int(math.Min(size-1, math.Ceil(at+spread)))
	return sample[a], sample[b]
}

// narrow keeps, in each row, the columns at or above from[i] and below
// to[i] (a nil slice leaves that bound).
func narrow(lo, hi, from, to []int32) {
	for i := range lo {
		if from != nil {
			lo[i] = max(lo[i], from[i])
		}
		if to != nil {
			hi[i] = min(hi[i], to[i])
		}
		hi[i] = max(hi[i], lo[i])
	}
}

// splitmixRNG is a tiny deterministic generator for pivots.
type splitmixRNG struct{ s uint64 }

func splitmix(seed uint64) *splitmixRNG { return &splitmixRNG{s: seed} }

func (r *splitmixRNG) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
