package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestQuantile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"median even", []float64{4, 1, 3, 2}, 0.5, 2.5},
		{"median odd", []float64{5, 1, 3}, 0.5, 3},
		{"p95 interpolates", []float64{1, 2, 3, 4}, 0.95, 3.85},
		{"min", []float64{2, 9, 4}, 0, 2},
		{"max", []float64{2, 9, 4}, 1, 9},
		{"single", []float64{7}, 0.99, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quantile(tt.xs, tt.q); !near(got, tt.want, 1e-12) {
				t.Errorf("Quantile(%v, %v) = %v, want %v", tt.xs, tt.q, got, tt.want)
			}
		})
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("Quantile of an empty sample is not NaN")
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	s, err := Summarize([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 8 || s.Min != 2 || s.Max != 9 || s.Mean != 5 || s.Median != 4.5 {
		t.Errorf("summary = %+v", s)
	}
	// sample stddev: sqrt(32/7)
	if !near(s.Stddev, math.Sqrt(32.0/7), 1e-12) || !near(s.CV, math.Sqrt(32.0/7)/5, 1e-12) {
		t.Errorf("stddev %v cv %v", s.Stddev, s.CV)
	}
	if _, err := Summarize(nil); err != ErrEmpty {
		t.Errorf("empty: err = %v, want ErrEmpty", err)
	}
	if _, err := Summarize([]float64{1, math.NaN()}); err == nil {
		t.Error("NaN accepted")
	}
}

func TestMedianCI(t *testing.T) {
	t.Parallel()
	xs := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	ci := MedianCI(xs, 0.95)
	// n=10: P(B ≤ 1) = 11/1024, so x(2)..x(9) covers 1 - 22/1024.
	if ci.Lo != 2 || ci.Hi != 9 || !ci.Exact || !near(ci.Achieved, 1-22.0/1024, 1e-12) {
		t.Errorf("n=10 CI = %+v, want [2, 9] at 0.97852", ci)
	}
	small := MedianCI([]float64{3, 1, 2, 5, 4}, 0.95)
	if small.Exact || small.Lo != 1 || small.Hi != 5 {
		t.Errorf("n=5 CI = %+v, want inexact full range", small)
	}
	// Coverage check by simulation: the interval holds the true median of
	// an exponential(1) (ln 2) at least 95 % of the time.
	r := rand.New(rand.NewPCG(1, 2))
	hits := 0
	const trials = 2000
	for range trials {
		s := make([]float64, 30)
		for i := range s {
			s[i] = r.ExpFloat64()
		}
		c := MedianCI(s, 0.95)
		if c.Lo <= math.Ln2 && math.Ln2 <= c.Hi {
			hits++
		}
	}
	if cov := float64(hits) / trials; cov < 0.94 {
		t.Errorf("simulated coverage %.3f < 0.94", cov)
	}
}

func TestMannWhitney(t *testing.T) {
	t.Parallel()
	seq := func(a, b int) []float64 {
		var s []float64
		for i := a; i <= b; i++ {
			s = append(s, float64(i))
		}
		return s
	}
	tests := []struct {
		name      string
		x, y      []float64
		wantU     float64
		wantP     float64
		tol       float64
		wantExact bool
	}{
		// R: wilcox.test(1:3, 4:6) gives W = 0, p = 0.1.
		{"exact separated 3x3", seq(1, 3), seq(4, 6), 0, 0.1, 1e-12, true},
		// 2 / choose(20, 10)
		{"exact separated 10x10", seq(1, 10), seq(11, 20), 0, 2.0 / 184756, 1e-15, true},
		// U = 1 of 4x5: P(U ≤ 1) = 2/126.
		{"exact 4x5 U=1", []float64{1, 2, 3, 5}, []float64{4, 6, 7, 8, 9}, 1, 4.0 / 126, 1e-12, true},
		{"empty sample", seq(1, 3), nil, 0, 1, 0, false},
		// R: wilcox.test(c(1,2,2,3), c(2,3,4,5,5), correct=TRUE): W = 2.5, p = 0.07855
		{"ties normal approximation", []float64{1, 2, 2, 3}, []float64{2, 3, 4, 5, 5}, 2.5, 0.07855, 2e-4, false},
		{"all tied", []float64{1, 1, 1}, []float64{1, 1}, 3, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MannWhitney(tt.x, tt.y)
			if got.U != tt.wantU || !near(got.P, tt.wantP, tt.tol) || got.Exact != tt.wantExact {
				t.Errorf("MannWhitney = %+v, want U=%v P=%v exact=%v", got, tt.wantU, tt.wantP, tt.wantExact)
			}
		})
	}
}

// The exact distribution sums to one, is symmetric, and agrees with the
// normal approximation for large samples.
func TestExactDistribution(t *testing.T) {
	t.Parallel()
	d := exactUDist(40, 50)
	var sum float64
	for i := range d {
		sum += d[i]
		if !near(d[i], d[len(d)-1-i], 1e-12) {
			t.Fatalf("asymmetric at %d: %v vs %v", i, d[i], d[len(d)-1-i])
		}
	}
	if !near(sum, 1, 1e-9) {
		t.Errorf("sum = %v", sum)
	}
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, 40)
	y := make([]float64, 50)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	for i := range y {
		y[i] = r.NormFloat64() + 0.4
	}
	ex := MannWhitney(x, y)
	y = append(y, y[0]) // a tie forces the approximation
	x = append(x, y[0])
	ap := MannWhitney(x, y)
	if !ex.Exact || ap.Exact || math.Abs(math.Log(ex.P/ap.P)) > 0.3 {
		t.Errorf("exact p %v vs approximate p %v", ex.P, ap.P)
	}
}

func TestHodgesLehmann(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float64, 30)
	y := make([]float64, 30)
	for i := range x {
		x[i] = 1000 * math.Exp(0.02*r.NormFloat64())
		y[i] = x[i] * 1.1
	}
	s, err := HodgesLehmann(x, y, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if !near(s.Delta, 0.1, 1e-9) {
		t.Errorf("delta = %v, want 0.1", s.Delta)
	}
	if !(s.CI.Lo < 0.1 && 0.1 < s.CI.Hi && s.CI.Exact) {
		t.Errorf("CI %+v does not hold 0.1", s.CI)
	}
	if _, err := HodgesLehmann([]float64{1, 0}, []float64{1}, 0.99); err == nil {
		t.Error("zero duration accepted")
	}
	tiny, _ := HodgesLehmann([]float64{1, 2}, []float64{1, 2}, 0.99)
	if tiny.CI.Exact {
		t.Errorf("2x2 at 99%% claims an exact interval: %+v", tiny.CI)
	}
}

func TestCompareVerdicts(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	noisy := func(n int, scale, cv float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = scale * math.Exp(cv*r.NormFloat64())
		}
		return s
	}
	base := noisy(40, 1000, 0.02)
	g := Gate{Threshold: 0.03, Alpha: 0.01}
	tests := []struct {
		name      string
		baseline  []float64
		candidate []float64
		want      Verdict
	}{
		{"same distribution", base, noisy(40, 1000, 0.02), Same},
		{"10% slower", base, noisy(40, 1100, 0.02), Slower},
		{"10% faster", base, noisy(40, 900, 0.02), Faster},
		{"1.5% slower is within threshold", base, noisy(40, 1015, 0.005), Same},
		{"too few candidate samples", base, noisy(9, 1000, 0.02), Ambiguous},
		{"too few, even when clearly slower", noisy(5, 1000, 0.02), noisy(5, 2000, 0.02), Ambiguous},
		{"too noisy to tell", noisy(12, 1000, 0.5), noisy(12, 1000, 0.5), Ambiguous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compare(tt.baseline, tt.candidate, g)
			if err != nil {
				t.Fatal(err)
			}
			if c.Verdict != tt.want {
				t.Errorf("verdict %s (%s), want %s", c.Verdict, c.Reason, tt.want)
			}
			if c.Reason == "" {
				t.Error("empty reason")
			}
		})
	}
	if _, err := Compare(base, base, Gate{Threshold: 0.03, Alpha: 0}); err == nil {
		t.Error("alpha 0 accepted")
	}
}
