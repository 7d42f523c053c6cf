package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// seqPairs draws n pairs of one-sample invocations, the candidate's
// durations exp(shift) times the reference's, each with log-normal noise
// sigma.
func seqPairs(r *rand.Rand, n int, shift, sigma float64) (ref, cand [][]float64) {
	for range n {
		ref = append(ref, []float64{1e6 * math.Exp(sigma*r.NormFloat64())})
		cand = append(cand, []float64{1e6 * math.Exp(shift+sigma*r.NormFloat64())})
	}
	return ref, cand
}

func TestSignBound(t *testing.T) {
	t.Parallel()
	// Ten unanimous pairs are evidence 2^10 / (pi-ish sqrt(10)) > 100.
	if got := MinSequentialPairs(0.01); got != 10 {
		t.Errorf("MinSequentialPairs(0.01) = %d, want 10", got)
	}
	if got := MinSequentialPairs(0.05); got >= MinSequentialPairs(0.01) {
		t.Errorf("MinSequentialPairs(0.05) = %d, want fewer than at 0.01", got)
	}
	// The evidence is symmetric and least at an even split.
	for n := 2; n < 40; n++ {
		for s := 0; s <= n; s++ {
			if d := signLogE(s, n) - signLogE(n-s, n); math.Abs(d) > 1e-9 {
				t.Fatalf("signLogE(%d, %d) != signLogE(%d, %d)", s, n, n-s, n)
			}
		}
		if e := signLogE(n/2, n); e > 0 {
			t.Errorf("signLogE(%d, %d) = %v, want ≤ 0 at an even split", n/2, n, e)
		}
	}
	// The bound widens (in count) as pairs accrue, never past the middle.
	prev := 0
	for n := 1; n <= 400; n++ {
		k := signBound(n, 0.01)
		if k < prev || 2*k > n+1 {
			t.Fatalf("signBound(%d) = %d after %d", n, k, prev)
		}
		prev = k
	}
}

// TestSequentialFalsePositives looks after every pair of an A/A
// comparison and counts the runs that were ever decided SLOWER or FASTER:
// the always-valid test keeps them at alpha, where the fixed-size test
// looked at every eighth pair does not.
func TestSequentialFalsePositives(t *testing.T) {
	t.Parallel()
	const runs, pairs, alpha = 300, 100, 0.05
	r := rand.New(rand.NewPCG(7, 11))
	g := Gate{Threshold: 0, Alpha: alpha}
	var seqFP, fixedFP int
	for range runs {
		ref, cand := seqPairs(r, pairs, 0, 0.1)
		seqHit, fixedHit := false, false
		for n := 2; n <= pairs; n++ {
			c, err := ComparePairedSequential(ref[:n], cand[:n], g, false)
			if err != nil {
				t.Fatal(err)
			}
			if c.Verdict == Slower || c.Verdict == Faster {
				seqHit = true
			}
			if n%8 == 0 {
				f, err := ComparePaired(ref[:n], cand[:n], g)
				if err != nil {
					t.Fatal(err)
				}
				if f.Verdict == Slower || f.Verdict == Faster {
					fixedHit = true
				}
			}
		}
		if seqHit {
			seqFP++
		}
		if fixedHit {
			fixedFP++
		}
	}
	seq, fixed := float64(seqFP)/runs, float64(fixedFP)/runs
	t.Logf("A/A, a look after every pair up to %d: sequential FPR %.3f, fixed-size test re-run FPR %.3f (alpha %g)", pairs, seq, fixed, alpha)
	if seq > alpha {
		t.Errorf("sequential FPR %.3f > alpha %g", seq, alpha)
	}
	if fixed <= alpha {
		t.Errorf("the fixed-size test re-run after every pair kept its FPR at %.3f ≤ alpha: the control shows nothing", fixed)
	}
}

func TestComparePairedSequential(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 5))
	g := Gate{Threshold: 0.10, Alpha: 0.01}
	// decide returns the verdict at the first decided look, and the pairs.
	decide := func(shift, sigma float64, maxN int) (Comparison, int) {
		ref, cand := seqPairs(r, maxN, shift, sigma)
		for n := 2; n <= maxN; n++ {
			c, err := ComparePairedSequential(ref[:n], cand[:n], g, n == maxN)
			if err != nil {
				t.Fatal(err)
			}
			if c.Verdict != Ambiguous || n == maxN {
				return c, n
			}
		}
		panic("unreachable")
	}
	if c, n := decide(math.Log(1.25), 0.05, 200); c.Verdict != Slower || c.Method != MethodSequential || c.Sequential == nil || c.Pairs != n {
		t.Errorf("25%% slower: %s after %d pairs (%s), want SLOWER", c.Verdict, n, c.Reason)
	}
	if c, n := decide(math.Log(0.75), 0.05, 200); c.Verdict != Faster {
		t.Errorf("25%% faster: %s after %d pairs (%s), want FASTER", c.Verdict, n, c.Reason)
	}
	if c, n := decide(0, 0.02, 200); c.Verdict != Same || !strings.Contains(c.Reason, "no significant change") {
		t.Errorf("A/A: %s after %d pairs (%s), want SAME", c.Verdict, n, c.Reason)
	}
	// Too noisy for the budget: AMBIGUOUS at the end, with how many more
	// pairs the noise would need.
	c, _ := decide(math.Log(1.08), 0.5, 40)
	if c.Verdict != Ambiguous || !strings.Contains(c.Reason, "more pairs") {
		t.Errorf("noisy: %s (%s), want AMBIGUOUS naming the pairs needed", c.Verdict, c.Reason)
	}
	// Fewer pairs than can decide: AMBIGUOUS, never SAME.
	ref, cand := seqPairs(r, 5, 0, 0.001)
	if c, _ := ComparePairedSequential(ref, cand, g, true); c.Verdict != Ambiguous || !strings.Contains(c.Reason, "too few pairs") || c.Shift.CI.Exact {
		t.Errorf("5 pairs: %s (%s), want AMBIGUOUS too few pairs", c.Verdict, c.Reason)
	}
	if _, err := ComparePairedSequential([][]float64{{1}}, [][]float64{{-1}}, g, true); err == nil {
		t.Error("a negative duration was accepted")
	}
}

func TestMorePairs(t *testing.T) {
	t.Parallel()
	g := Gate{Threshold: 0.10, Alpha: 0.01}
	// Half-width 0.2 on the log scale around +5 %: SAME needs it under
	// log(1.1) - log(1.05), about 0.047: some 18 times the pairs.
	c := Comparison{Pairs: 20, Shift: Shift{Delta: 0.05, CI: Interval{Lo: math.Expm1(math.Log(1.05) - 0.2), Hi: math.Expm1(math.Log(1.05) + 0.2), Exact: true}}}
	more, ok := MorePairs(c, g)
	want := 20*math.Pow(0.2/(math.Log(1.1)-math.Log(1.05)), 2) - 20
	if !ok || math.Abs(float64(more)-want) > 1 {
		t.Errorf("MorePairs = %d, %v; want about %.0f", more, ok, want)
	}
	c.Shift.CI.Exact = false
	if _, ok := MorePairs(c, g); ok {
		t.Error("MorePairs without an interval gave an estimate")
	}
}
