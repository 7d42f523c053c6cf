package main

import (
	"math/rand/v2"
	"slices"

	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// seqHorizon is the number of invocations over which a load scenario
// plays out (ramps and step changes; the old fixed 30 rounds): rounds:
// auto may stop before it or run past it, where the load stays as it
// ended (a ramp keeps rising).
const seqHorizon = 60

// seqLoads are the drift table's load scenarios plus bursts: every
// invocation, either side, slowed by a random 0-100 % (CPU hogs sharing
// the cores), the kind of noise that left issue 35's fixed 10 rounds
// AMBIGUOUS.
func seqLoads() []func(r *rand.Rand) load {
	return append(drifts(), func(r *rand.Rand) load {
		return load{"bursts x1-2", func(int, int) float64 { return 1 + r.Float64() }}
	})
}

// seqCell is one row of the sequential table: one load, one true change.
type seqCell struct {
	scenario string
	change   float64
	// slower, faster, same and ambiguous are the shares of runs that
	// ended with each verdict.
	slower, faster, same, ambiguous float64
	// pairs are the median and 90th percentile of the pairs spent.
	medianPairs, p90Pairs float64
}

// seqRun runs one benchmark with rounds: auto under ld as the step does:
// an ABBA block of two pairs at a time, the sequential test after each,
// stopping once decided or at maxPairs (judged then with final true). It
// returns the verdict and the pairs spent.
func seqRun(r *rand.Rand, ld load, maxPairs, reps int, factor float64, g stats.Gate) (stats.Verdict, int) {
	var ref, cand [][]float64
	i := 0
	for len(ref) < maxPairs {
		order := []bool{true, false, false, true}
		if maxPairs-len(ref) < 2 {
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
			s := invocationModel(r, reps, f, ld.at(min(i, seqHorizon), seqHorizon))
			i++
			if isCand {
				cand = append(cand, s)
			} else {
				ref = append(ref, s)
			}
		}
		final := len(ref) >= maxPairs
		c, err := stats.ComparePairedSequential(ref, cand, g, final)
		if err != nil {
			panic(err)
		}
		if c.Verdict != stats.Ambiguous || final {
			return c.Verdict, len(ref)
		}
	}
	panic("unreachable")
}

// seqTable measures rounds: auto under every load for each true change:
// the share of each verdict and the pairs spent.
func seqTable(r *rand.Rand, trials, maxPairs, reps int, changes []float64, g stats.Gate) []seqCell {
	var out []seqCell
	for _, mk := range seqLoads() {
		name := mk(r).name
		for _, change := range changes {
			c := seqCell{scenario: name, change: change}
			pairs := make([]float64, 0, trials)
			for range trials {
				v, n := seqRun(r, mk(r), maxPairs, reps, 1+change, g)
				pairs = append(pairs, float64(n))
				switch v {
				case stats.Slower:
					c.slower++
				case stats.Faster:
					c.faster++
				case stats.Same:
					c.same++
				default:
					c.ambiguous++
				}
			}
			for _, p := range []*float64{&c.slower, &c.faster, &c.same, &c.ambiguous} {
				*p /= float64(trials)
			}
			slices.Sort(pairs)
			c.medianPairs, c.p90Pairs = stats.Median(pairs), stats.Quantile(pairs, 0.9)
			out = append(out, c)
		}
	}
	return out
}
