package stats_test

import (
	"fmt"

	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// A candidate 10 % slower than its baseline, 12 samples a side.
func ExampleCompare() {
	base := []float64{1000, 1010, 990, 1005, 995, 1020, 980, 1002, 998, 1012, 988, 1001}
	cand := make([]float64, len(base))
	for i, v := range base {
		cand[i] = 1.1 * v
	}
	c, err := stats.Compare(base, cand, stats.Gate{Threshold: 0.03, Alpha: 0.01})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %+.1f%% p=%.1e\n", c.Verdict, 100*c.Shift.Delta, c.P())
	// Output: SLOWER +10.0% p=7.4e-07
}
