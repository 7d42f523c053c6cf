package main

import (
	"math/rand/v2"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// TestGoal checks the statistics benchmark's goal on fewer trials than
// the full table: false positives ≤ 1 % and power ≥ 95 % for a true 5 %
// slowdown at CV 2 % with 50 samples a side, and false positives ≤ 1 % at
// CV 5 % with frequent throttling.
func TestGoal(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	c := run(r, noise{cv: 0.02, outlierRate: 0.01}, 50, 600, 0.05)
	if c.fpGate > 0.01 || c.pwGate < 0.95 {
		t.Errorf("CV 2%%, n=50: FP %.3f (≤ 0.01), power %.3f (≥ 0.95)", c.fpGate, c.pwGate)
	}
	c = run(r, noise{cv: 0.05, outlierRate: 0.05}, 50, 600, 0.05)
	if c.fpGate > 0.01 {
		t.Errorf("CV 5%%, 5%% outliers, n=50: FP %.3f > 0.01", c.fpGate)
	}
}

// TestDriftGoal checks the same-run A/B gate's goal under a drifting load
// on fewer runs than the full table: false positives ≤ 1 % and power ≥
// 95 % for a true 5 % slowdown in every load scenario, with rounds: 30.
func TestDriftGoal(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 8))
	g := stats.Gate{Threshold: stats.DefaultThreshold, Alpha: stats.DefaultAlpha}
	for _, c := range driftTable(r, 200, 30, 15, g, true) {
		if c.fp > 0.01 || c.power < 0.95 {
			t.Errorf("%s: FP %.3f (≤ 0.01), power %.3f (≥ 0.95)", c.scenario, c.fp, c.power)
		}
	}
}

// TestSequentialGoal checks rounds: auto's goal on fewer runs than the
// full table, under every load: decisions on no change (SLOWER or FASTER,
// at any look) at most alpha, and a 25 % slowdown found SLOWER within the
// default budget in ≥ 95 % of the runs.
func TestSequentialGoal(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 9))
	g := stats.Gate{Threshold: stats.DefaultThreshold, Alpha: stats.DefaultAlpha}
	for _, c := range seqTable(r, 60, pipeline.DefaultMaxRounds, 15, []float64{0, 0.25}, g) {
		if c.change == 0 && c.slower+c.faster > g.Alpha || c.change == 0.25 && c.slower < 0.95 {
			t.Errorf("%s, %+.0f%%: SLOWER %.3f FASTER %.3f SAME %.3f AMBIGUOUS %.3f", c.scenario, 100*c.change, c.slower, c.faster, c.same, c.ambiguous)
		}
	}
}
