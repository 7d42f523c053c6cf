package suite

import (
	"testing"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// TestSpecBoundsMatchStats: the spec checks rounds and the gate's alpha
// without importing stats; its bounds must be the paired test's.
func TestSpecBoundsMatchStats(t *testing.T) {
	t.Parallel()
	if pipeline.MaxRounds != stats.MaxPairs {
		t.Errorf("pipeline.MaxRounds = %d, stats.MaxPairs = %d", pipeline.MaxRounds, stats.MaxPairs)
	}
	if pipeline.DefaultGateAlpha != stats.DefaultAlpha {
		t.Errorf("pipeline.DefaultGateAlpha = %g, stats.DefaultAlpha = %g", pipeline.DefaultGateAlpha, stats.DefaultAlpha)
	}
	for _, alpha := range []float64{0.5, 0.1, 0.05, 0.01, 0.001, 1e-6, 1e-300} {
		if got, want := pipeline.MinRounds(alpha), stats.MinPairs(alpha); got != want {
			t.Errorf("alpha %g: pipeline.MinRounds = %d, stats.MinPairs = %d", alpha, got, want)
		}
	}
}
