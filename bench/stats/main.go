package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"text/tabwriter"
)

func main() {
	trials := flag.Int("trials", 2000, "simulated comparisons per cell and true change")
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
	fmt.Printf("\ngoal (FP ≤ 1%% everywhere; power ≥ 95%% at CV 2%% with ≤ 50 a side): ")
	if ok && goal {
		fmt.Println("met")
		return
	}
	fmt.Println("NOT met")
	os.Exit(1)
}
