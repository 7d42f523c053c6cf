package main

import (
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// largeCell is the cost of one comparison of n samples a side.
type largeCell struct {
	n        int
	verdict  stats.Verdict
	wall     time.Duration
	cpu      time.Duration
	allocMB  float64 // bytes allocated by the comparison
	peakRSSB int64   // the process's peak RSS after it
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// largeTable times stats.Compare (the stored-baseline gate and gpuattest
// compare: medians, Mann-Whitney, Hodges-Lehmann shift and interval) on
// n lognormal samples a side, the candidate 3 % slower.
func largeTable(r *rand.Rand, sizes []int) []largeCell {
	var out []largeCell
	for _, n := range sizes {
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i] = 1000 * math.Exp(0.02*r.NormFloat64())
			y[i] = 1030 * math.Exp(0.02*r.NormFloat64())
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c0, t0 := cpuTime(), time.Now()
		c, err := stats.Compare(x, y, stats.Gate{Threshold: 0.01, Alpha: 0.01})
		if err != nil {
			panic(err)
		}
		wall, cpu := time.Since(t0), cpuTime()-c0
		runtime.ReadMemStats(&after)
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		out = append(out, largeCell{n: n, verdict: c.Verdict, wall: wall, cpu: cpu,
			allocMB: float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20), peakRSSB: ru.Maxrss * 1024})
	}
	return out
}
