package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

func main() {
	trials := flag.Int("trials", 2000, "simulated comparisons per cell and true change")
	driftTrials := flag.Int("drift-trials", 1000, "simulated benchmark runs per load scenario and true change")
	rounds := flag.Int("rounds", 30, "same-run A/B, fixed rounds: invocations of each side")
	reps := flag.Int("reps", 15, "same-run A/B: samples per invocation")
	seqTrials := flag.Int("seq-trials", 400, "rounds: auto: simulated benchmark runs per load scenario and true change")
	maxRounds := flag.Int("max-rounds", pipeline.DefaultMaxRounds, "rounds: auto: the most pairs (the default of a benchmark with a reference)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	r := rand.New(rand.NewPCG(*seed, 0x9e3779b97f4a7c15))
	var cells []cell
	for _, out := range []float64{0.01, 0.05} {
		for _, cv := range []float64{0.01, 0.02, 0.05} {
			for _, n := range []int{10, 20, 30, 50} {
				if out == 0.05 && n != 50 {
					continue
				}
				cells = append(cells, run(r, noise{cv: cv, outlierRate: out}, n, *trials, 0.05))
			}
		}
	}
	fmt.Printf("gpuattest gate (Mann-Whitney p < 0.01 AND Hodges-Lehmann slowdown > 3%%) vs naive gate (mean slower by > 3%%)\n")
	fmt.Printf("lognormal timings, throttle outliers x1.2-2.0; %d trials per cell; FP: true change 0; power: true slowdown 5%%\n\n", *trials)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CV\toutliers\tn/side\tFP gate\tFP naive\tpower gate\tpower naive\t")
	ok := true
	for _, c := range cells {
		fmt.Fprintf(tw, "%.0f%%\t%.0f%%\t%d\t%.2f%%\t%.2f%%\t%.1f%%\t%.1f%%\t\n",
			100*c.noise.cv, 100*c.noise.outlierRate, c.n, 100*c.fpGate, 100*c.fpNaive, 100*c.pwGate, 100*c.pwNaive)
		if c.n <= 50 && c.fpGate > 0.01 {
			ok = false
		}
	}
	tw.Flush()
	goal := false
	for _, c := range cells {
		if c.noise.cv == 0.02 && c.noise.outlierRate == 0.01 && c.n <= 50 && c.pwGate >= 0.95 {
			goal = true
		}
	}
	fmt.Printf("\ngoal (FP ≤ 1%% everywhere; power ≥ 95%% at CV 2%% with ≤ 50 a side): %s\n", metStr(ok && goal))
	allMet := ok && goal

	g := stats.Gate{Threshold: stats.DefaultThreshold, Alpha: stats.DefaultAlpha}
	fmt.Printf("\nUnder a drifting load: same-run A/B (reference and candidate, %d rounds each in ABBA blocks, %d samples per invocation)\n", *rounds, *reps)
	fmt.Printf("vs a stored baseline recorded on the quiet machine (%d samples pooled). Threshold %.0f%%, alpha %g; %d runs per cell.\n", *rounds**reps, 100*g.Threshold, g.Alpha, *driftTrials)
	fmt.Printf("Each invocation: its own level (cv 2%%) x load x true factor; samples cv 2%%, 5%% of them 1.2-2x slower.\n\n")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "load\tgate\tFP (no change)\tpower (5% slower)\t")
	driftOK := true
	for _, c := range driftTable(r, *driftTrials, *rounds, *reps, g, false) {
		fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%.1f%%\t\n", c.scenario, c.gate, 100*c.fp, 100*c.power)
		if strings.HasPrefix(c.gate, "same-run A/B, paired") && (c.fp > 0.01 || c.power < 0.95) {
			driftOK = false
		}
	}
	tw.Flush()
	fmt.Printf("\ngoal (paired A/B: FP ≤ 1%% and power ≥ 95%% under every load): %s\n", metStr(driftOK))

	seqOK := seqSection(r, *seqTrials, *maxRounds, *reps, g)

	const precision = 0.01
	fmt.Printf("\nrepeats: auto (precision %.0f%%: stop once the 95%% interval of the median is within ±%.0f%%, from the %dth sample) vs repeats: 50\n\n", 100*precision, 100*precision, stats.MinSamples)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CV\tmedian samples\tp90 samples\tfixed\tstopped by precision\tachieved ±\t")
	autoOK := false
	for _, c := range autoTable(r, *trials, precision, 100000) {
		fmt.Fprintf(tw, "%.0f%%\t%.0f\t%.0f\t%d\t%.1f%%\t%.2f%%\t\n", 100*c.cv, c.medianN, c.p90N, c.fixed, 100*c.reachedPrecision, 100*c.precisionAtStopP50)
		if c.cv == 0.02 && c.medianN <= float64(c.fixed)/2 {
			autoOK = true
		}
	}
	tw.Flush()
	fmt.Printf("\ngoal (median samples at CV 2%% at most half of 50): %s\n", metStr(autoOK))

	fmt.Printf("\nstats.Compare (medians, Mann-Whitney, Hodges-Lehmann shift and interval) on n samples a side, 3%% slower\n\n")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "n/side\tverdict\twall\tCPU\tallocated\tpeak RSS\t")
	largeOK := true
	for _, c := range largeTable(r, []int{10_000, 100_000, 1_000_000}) {
		fmt.Fprintf(tw, "%d\t%s\t%.2fs\t%.2fs\t%.0f MB\t%.0f MB\t\n", c.n, c.verdict, c.wall.Seconds(), c.cpu.Seconds(), c.allocMB, float64(c.peakRSSB)/(1<<20))
		if c.n == 1_000_000 && (c.cpu.Seconds() > 2 || c.allocMB > 200) {
			largeOK = false
		}
	}
	tw.Flush()
	fmt.Printf("\ngoal (1M samples a side in ≤ 2 s of CPU and ≤ 200 MB allocated): %s\n", metStr(largeOK))
	if !allMet || !driftOK || !seqOK || !autoOK || !largeOK {
		os.Exit(1)
	}
}

// seqSection prints the rounds: auto table and reports whether its goal
// was met: every decision on no change (SLOWER or FASTER) at most alpha
// under every load, looked at after every block, and a 25 % slowdown
// found SLOWER in ≥ 95 % of the runs within the budget.
func seqSection(r *rand.Rand, trials, maxPairs, reps int, g stats.Gate) bool {
	fmt.Printf("\nrounds: auto: ABBA blocks of two pairs, the sequential sign test (confidence sequence) after every block, stop once decided\n")
	fmt.Printf("or at %d pairs; threshold %.0f%%, alpha %g; %d samples per invocation; %d runs per cell. FP: SLOWER or FASTER with no change,\n", maxPairs, 100*g.Threshold, g.Alpha, reps, trials)
	fmt.Printf("over all the looks of a run. Loads as above over %d invocations, then held; bursts: each invocation x1-2 at random.\n\n", seqHorizon)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "load	true change	SLOWER	FASTER	SAME	AMBIGUOUS	pairs p50	pairs p90	")
	ok := true
	for _, c := range seqTable(r, trials, maxPairs, reps, []float64{0, 0.05, 0.25}, g) {
		fmt.Fprintf(tw, "%s	%+.0f%%	%.2f%%	%.2f%%	%.1f%%	%.1f%%	%.0f	%.0f	\n", c.scenario, 100*c.change,
			100*c.slower, 100*c.faster, 100*c.same, 100*c.ambiguous, c.medianPairs, c.p90Pairs)
		switch {
		case c.change == 0 && c.slower+c.faster > g.Alpha:
			ok = false
		case c.change == 0.25 && c.slower < 0.95:
			ok = false
		}
	}
	tw.Flush()
	fmt.Printf("\ngoal (rounds: auto: FP ≤ alpha under every load across all looks; 25%% slower found SLOWER in ≥ 95%% of runs): %s\n", metStr(ok))
	return ok
}

func metStr(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
