package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestSignedRank(t *testing.T) {
	t.Parallel()
	// R: wilcox.test(x, y, paired = TRUE) on the depression-scale example
	// of Hollander & Wolfe gives V = 40, p-value = 0.03906.
	x := []float64{1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30}
	y := []float64{0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29}
	d := make([]float64, len(x))
	for i := range x {
		d[i] = x[i] - y[i]
	}
	r := SignedRank(d)
	if r.W != 40 || !r.Exact || !near(r.P, 0.0390625, 1e-9) {
		t.Errorf("SignedRank = %+v, want W=40 p=0.03906 exact", r)
	}
	// All ten positive: W = 55, p = 2/1024.
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if r := SignedRank(ten); r.W != 55 || !near(r.P, 2.0/1024, 1e-12) {
		t.Errorf("all positive: %+v, want W=55 p=%v", r, 2.0/1024)
	}
	if r := SignedRank([]float64{0, 0}); r.P != 1 || r.N != 0 {
		t.Errorf("zeros: %+v, want P=1 N=0", r)
	}
	// Tied magnitudes use the normal approximation.
	if r := SignedRank([]float64{1, -1, 1, 2, 2, 3, 3, 3}); r.Exact || r.P <= 0 || r.P > 1 {
		t.Errorf("ties: %+v, want an approximate p in (0, 1]", r)
	}
	// The exact distribution sums to one and is symmetric.
	dist := signedRankDist(20)
	var sum float64
	for i, p := range dist {
		sum += p
		if !near(p, dist[len(dist)-1-i], 1e-15) {
			t.Fatalf("n=20 distribution not symmetric at %d", i)
		}
	}
	if !near(sum, 1, 1e-12) {
		t.Errorf("n=20 distribution sums to %v", sum)
	}
}

func TestMinPairs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		alpha float64
		want  int
	}{{0.05, 6}, {0.01, 8}, {0.001, 11}} {
		if got := MinPairs(tt.alpha); got != tt.want {
			t.Errorf("MinPairs(%v) = %d, want %d", tt.alpha, got, tt.want)
		}
	}
}

func TestWalshShiftCoverage(t *testing.T) {
	t.Parallel()
	// The interval holds the true centre (0.05) of symmetric noise at
	// least as often as its level says.
	r := rand.New(rand.NewPCG(3, 4))
	const trials = 2000
	for _, n := range []int{8, 12, 30, 80} {
		hits, exact := 0, true
		var achieved float64
		for range trials {
			d := make([]float64, n)
			for i := range d {
				d[i] = 0.05 + 0.02*r.NormFloat64()
			}
			_, ci := WalshShift(d, 0.95)
			exact = exact && ci.Exact
			achieved = ci.Achieved
			if ci.Lo <= 0.05 && 0.05 <= ci.Hi {
				hits++
			}
		}
		cov := float64(hits) / trials
		if !exact || achieved < 0.95 || cov < 0.935 {
			t.Errorf("n=%d: coverage %.3f (achieved %.4f, exact %v), want ≥ 0.95", n, cov, achieved, exact)
		}
	}
	if _, ci := WalshShift([]float64{1, 2, 3}, 0.99); ci.Exact || ci.Lo != 1 || ci.Hi != 3 {
		t.Errorf("n=3 at 99%%: %+v, want the inexact full range", ci)
	}
}

// invocations simulates rounds pairs of invocations: each invocation has
// its own level (process-to-process noise, cv 2 %) times the load at that
// moment, and reps lognormal samples around it.
func invocations(r *rand.Rand, rounds, reps int, factor float64, load func(i int) float64) (ref, cand [][]float64) {
	draw := func(i int, f float64) []float64 {
		level := 1000 * f * load(i) * math.Exp(0.02*r.NormFloat64())
		s := make([]float64, reps)
		for k := range s {
			s[k] = level * math.Exp(0.03*r.NormFloat64())
		}
		return s
	}
	for p := range rounds {
		ref = append(ref, draw(2*p, 1))
		cand = append(cand, draw(2*p+1, factor))
	}
	return ref, cand
}

func TestComparePaired(t *testing.T) {
	t.Parallel()
	g := Gate{Threshold: 0.10, Alpha: 0.01}
	quiet := func(int) float64 { return 1 }
	tests := []struct {
		name   string
		rounds int
		factor float64
		load   func(int) float64
		want   Verdict
	}{
		{"identical", 10, 1, quiet, Same},
		{"25% less work in the reference", 10, 1 / 0.75, quiet, Slower},
		{"faster", 10, 0.7, quiet, Faster},
		// A load that doubles halfway hits both sides of every pair alike.
		{"identical under a step change", 10, 1, func(i int) float64 {
			if i >= 10 {
				return 2
			}
			return 1
		}, Same},
		{"too few rounds for alpha", 6, 1 / 0.75, quiet, Ambiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			ref, cand := invocations(r, tt.rounds, 20, tt.factor, tt.load)
			c, err := ComparePaired(ref, cand, g)
			if err != nil {
				t.Fatal(err)
			}
			if c.Verdict != tt.want {
				t.Errorf("verdict %s (%s), want %s", c.Verdict, c.Reason, tt.want)
			}
			if c.Method != MethodPaired || c.Pairs != tt.rounds || c.SignedRank == nil || c.Test != nil {
				t.Errorf("method %q pairs %d signed rank %v test %v", c.Method, c.Pairs, c.SignedRank, c.Test)
			}
		})
	}
	t.Run("too few rounds says so", func(t *testing.T) {
		ref, cand := invocations(rand.New(rand.NewPCG(1, 1)), 6, 20, 1.3, quiet)
		c, _ := ComparePaired(ref, cand, g)
		if !strings.Contains(c.Reason, "need ≥ 8 rounds") {
			t.Errorf("reason %q does not name the rounds needed", c.Reason)
		}
	})
	if _, err := ComparePaired([][]float64{{1}}, nil, g); err == nil {
		t.Error("unequal sides accepted")
	}
	if _, err := ComparePaired([][]float64{{1}}, [][]float64{{}}, g); err == nil {
		t.Error("an empty invocation accepted")
	}
	if _, err := ComparePaired([][]float64{{1}}, [][]float64{{-1}}, g); err == nil {
		t.Error("a negative sample accepted")
	}
}

// bruteHL is the definition: every pairwise log difference, sorted.
func bruteHL(x, y []float64, level float64) Shift {
	var d []float64
	for _, b := range y {
		for _, a := range x {
			d = append(d, math.Log(b)-math.Log(a))
		}
	}
	slices.Sort(d)
	m, n := len(x), len(y)
	mn := len(d)
	z := NormalQuantile(1 - (1-level)/2)
	k := int(math.Floor(float64(mn)/2 - z*math.Sqrt(float64(mn)*float64(m+n+1)/12)))
	if k < 1 {
		k = 1
	}
	return Shift{Delta: math.Expm1(quantileSorted(d, 0.5)), CI: Interval{Lo: math.Expm1(d[k-1]), Hi: math.Expm1(d[mn-k])}}
}

func TestHodgesLehmannSelectionMatchesDefinition(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	for trial := range 300 {
		m, n := 1+r.IntN(120), 1+r.IntN(120)
		draw := func(k int) []float64 {
			s := make([]float64, k)
			for i := range s {
				if trial%3 == 0 {
					s[i] = float64(1 + r.IntN(5)) // heavy ties
				} else {
					s[i] = 1000 * math.Exp(0.05*r.NormFloat64())
				}
			}
			return s
		}
		x, y := draw(m), draw(n)
		got, err := HodgesLehmann(x, y, 0.99)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteHL(x, y, 0.99)
		if !near(got.Delta, want.Delta, 1e-12) || got.CI.Lo != want.CI.Lo || got.CI.Hi != want.CI.Hi {
			t.Fatalf("trial %d (m=%d n=%d): got %+v, want %+v", trial, m, n, got, want)
		}
	}
}

func TestLargeSamplesAreFast(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	const n = 300_000
	x, y := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i] = 1000 * math.Exp(0.02*r.NormFloat64())
		y[i] = 1030 * math.Exp(0.02*r.NormFloat64())
	}
	c, err := Compare(x, y, Gate{Threshold: 0.01, Alpha: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	if c.Verdict != Slower || !near(c.Shift.Delta, 0.03, 0.001) {
		t.Errorf("3%% slower with %d samples a side: %s %+v", n, c.Verdict, c.Shift)
	}
	if _, err := Summarize(x); err != nil {
		t.Fatal(err)
	}
}
