package main

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// load is the machine's state over one benchmark run: a multiplier on
// every timing, as a function of the invocation index 0..n-1.
type load struct {
	name string
	// at returns the multiplier for invocation i of n.
	at func(i, n int) float64
}

// drifts returns the load scenarios of the drift table. Each call draws
// the random ones afresh from r.
func drifts() []func(r *rand.Rand) load {
	return []func(r *rand.Rand) load{
		func(*rand.Rand) load { return load{"quiet", func(int, int) float64 { return 1 }} },
		func(*rand.Rand) load {
			return load{"ramp +50%", func(i, n int) float64 { return 1 + 0.5*float64(i)/float64(n) }}
		},
		func(r *rand.Rand) load { return stepLoad(r, "steps 20-100%", 0, true) },
		func(r *rand.Rand) load { return stepLoad(r, "ramp + steps", 0.5, false) },
	}
}

// stepLoad is a load with two to four step changes of 20-100 % at random
// moments (a neighbour starting and stopping) on top of a linear ramp of
// ramp over the run; with both, a step goes up or back down at random.
func stepLoad(r *rand.Rand, name string, ramp float64, both bool) load {
	k := 2 + r.IntN(3)
	at := make([]float64, k)
	mult := make([]float64, k)
	for j := range at {
		at[j] = r.Float64()
		mult[j] = 1.2 + 0.8*r.Float64()
		if both && r.IntN(2) == 0 {
			mult[j] = 1 / mult[j]
		}
	}
	return load{name, func(i, n int) float64 {
		x := float64(i) / float64(n)
		m := 1 + ramp*x
		for j := range at {
			if x >= at[j] {
				m *= mult[j]
			}
		}
		return m
	}}
}

// invocationModel draws one invocation's samples: a level with its own
// process-to-process noise (cv 2 %) times the load and the true factor,
// then reps lognormal samples around it (cv 2 %), 5 % of them slowed by
// 1.2-2x (preempted or throttled iterations).
func invocationModel(r *rand.Rand, reps int, factor, ld float64) []float64 {
	level := 10000 * factor * ld * math.Exp(0.02*r.NormFloat64())
	s := make([]float64, reps)
	for i := range s {
		v := level * math.Exp(0.02*r.NormFloat64())
		if r.Float64() < 0.05 {
			v *= 1.2 + 0.8*r.Float64()
		}
		s[i] = v
	}
	return s
}

// driftCell is one row of the drift table: one load scenario, one gate.
type driftCell struct {
	scenario, gate string
	fp, power      float64
}

// abGate runs one same-run A/B benchmark of rounds ABBA pairs under ld and
// returns the paired verdict (the gate of a benchmark with a reference)
// and, when withPooled, for comparison, the verdict of Mann-Whitney +
// Hodges-Lehmann over the same samples pooled per side.
func abGate(r *rand.Rand, ld load, rounds, reps int, factor float64, g stats.Gate, withPooled bool) (paired, pooled stats.Verdict) {
	n := 2 * rounds
	var ref, cand [][]float64
	var allRef, allCand []float64
	i := 0
	for left := rounds; left > 0; left -= 2 {
		order := []bool{true, false, false, true}
		if left < 2 {
			order = order[:2]
		}
		if r.IntN(2) == 0 {
			for j := range order {
				order[j] = !order[j]
			}
		}
		for _, isCand := range order {
			f := 1.0
			if isCand {
				f = factor
			}
			s := invocationModel(r, reps, f, ld.at(i, n))
			i++
			if isCand {
				cand = append(cand, s)
				allCand = append(allCand, s...)
			} else {
				ref = append(ref, s)
				allRef = append(allRef, s...)
			}
		}
	}
	c, err := stats.ComparePaired(ref, cand, g)
	if err != nil {
		panic(err)
	}
	if !withPooled {
		return c.Verdict, ""
	}
	p, err := stats.Compare(allRef, allCand, g)
	if err != nil {
		panic(err)
	}
	return c.Verdict, p.Verdict
}

// storedGate compares a candidate measured under ld (seeds invocations of
// reps samples, pooled) with a baseline recorded earlier on a quiet
// machine: the stored-baseline gate.
func storedGate(r *rand.Rand, ld load, seeds, reps int, factor float64, g stats.Gate) stats.Verdict {
	var base, cand []float64
	for i := range seeds {
		base = append(base, invocationModel(r, reps, 1, 1)...)
		cand = append(cand, invocationModel(r, reps, factor, ld.at(i, seeds))...)
	}
	c, err := stats.Compare(base, cand, g)
	if err != nil {
		panic(err)
	}
	return c.Verdict
}

// driftTable measures each gate's false-positive rate and power for a true
// 5 % slowdown under each load scenario; pairedOnly leaves out the two
// gates it is compared with.
func driftTable(r *rand.Rand, trials, rounds, reps int, g stats.Gate, pairedOnly bool) []driftCell {
	var out []driftCell
	for _, mk := range drifts() {
		name := mk(r).name
		var fp, pw [3]int // stored, A/B paired, A/B pooled
		for _, factor := range []float64{1, 1.05} {
			for range trials {
				ld := mk(r)
				var s stats.Verdict
				if !pairedOnly {
					s = storedGate(r, ld, 2, rounds*reps/2, factor, g)
				}
				p, q := abGate(r, ld, rounds, reps, factor, g, !pairedOnly)
				cnt := &fp
				if factor != 1 {
					cnt = &pw
				}
				for k, v := range []stats.Verdict{s, p, q} {
					if v == stats.Slower {
						cnt[k]++
					}
				}
			}
		}
		for k, gate := range []string{"stored baseline (MWU+HL)", "same-run A/B, paired (gpuattest)", "same-run A/B, pooled MWU+HL"} {
			if pairedOnly && k != 1 {
				continue
			}
			out = append(out, driftCell{scenario: name, gate: gate, fp: float64(fp[k]) / float64(trials), power: float64(pw[k]) / float64(trials)})
		}
	}
	return out
}

// autoCell compares repeats: auto with a fixed count.
type autoCell struct {
	cv                 float64
	medianN, p90N      float64
	fixed              int
	reachedPrecision   float64 // share of cases stopped by the precision
	precisionAtStopP50 float64
}

// autoTable simulates adaptive repeats as the harness runs them (the
// precision checked at every sample from the 10th, stopping once the 95 %
// interval of the median is within ±precision) on lognormal timings.
func autoTable(r *rand.Rand, trials int, precision float64, maxSamples int) []autoCell {
	var out []autoCell
	for _, cv := range []float64{0.01, 0.02, 0.05} {
		sigma := math.Sqrt(math.Log1p(cv * cv))
		ns := make([]float64, 0, trials)
		var reached int
		var achieved []float64
		for range trials {
			var xs []float64
			for {
				xs = append(xs, 10000*math.Exp(sigma*r.NormFloat64()))
				if len(xs) >= stats.MinSamples {
					if p := stats.MedianPrecision(xs); p <= precision {
						reached++
						achieved = append(achieved, p)
						break
					}
				}
				if len(xs) >= maxSamples {
					break
				}
			}
			ns = append(ns, float64(len(xs)))
		}
		slices.Sort(ns)
		out = append(out, autoCell{cv: cv, medianN: stats.Median(ns), p90N: stats.Quantile(ns, 0.9), fixed: 50,
			reachedPrecision: float64(reached) / float64(trials), precisionAtStopP50: stats.Median(achieved)})
	}
	return out
}
