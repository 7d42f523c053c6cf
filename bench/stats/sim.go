package main

import (
	"math"
	"math/rand/v2"

	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// noise describes one simulated timing distribution.
type noise struct {
	cv          float64 // coefficient of variation of the lognormal body
	outlierRate float64 // share of samples hit by a throttle event
}

// sample draws n timings around median (ns), slowed by factor.
func (nz noise) sample(r *rand.Rand, n int, median, factor float64) []float64 {
	sigma := math.Sqrt(math.Log1p(nz.cv * nz.cv))
	s := make([]float64, n)
	for i := range s {
		v := median * factor * math.Exp(sigma*r.NormFloat64())
		if r.Float64() < nz.outlierRate {
			v *= 1.2 + 0.8*r.Float64() // a throttled iteration
		}
		s[i] = v
	}
	return s
}

// cell is one row of the table.
type cell struct {
	noise   noise
	n       int
	fpGate  float64 // SLOWER with no true change
	fpNaive float64
	pwGate  float64 // SLOWER with a true 5 % slowdown
	pwNaive float64
}

// naiveSlower is the gate many CI scripts use: candidate mean more than 3 %
// above the baseline mean.
func naiveSlower(base, cand []float64) bool {
	mean := func(xs []float64) float64 {
		var s float64
		for _, v := range xs {
			s += v
		}
		return s / float64(len(xs))
	}
	return mean(cand) > 1.03*mean(base)
}

// run simulates trials comparisons per true change for one noise and size.
func run(r *rand.Rand, nz noise, n, trials int, slowdown float64) cell {
	g := stats.Gate{Threshold: stats.DefaultThreshold, Alpha: stats.DefaultAlpha}
	c := cell{noise: nz, n: n}
	for _, change := range []float64{1, 1 + slowdown} {
		var gate, naive int
		for range trials {
			base := nz.sample(r, n, 10000, 1)
			cand := nz.sample(r, n, 10000, change)
			cmp, err := stats.Compare(base, cand, g)
			if err != nil {
				panic(err)
			}
			if cmp.Verdict == stats.Slower {
				gate++
			}
			if naiveSlower(base, cand) {
				naive++
			}
		}
		if change == 1 {
			c.fpGate, c.fpNaive = float64(gate)/float64(trials), float64(naive)/float64(trials)
		} else {
			c.pwGate, c.pwNaive = float64(gate)/float64(trials), float64(naive)/float64(trials)
		}
	}
	return c
}
