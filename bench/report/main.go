// Command report prints how long gpuattest report takes, and how large
// report.html gets, for a run with a 1,000-sample benchmark (per side and
// case, against a same-run reference) and a 1-hour burn-in with telemetry
// at one sample a second (simulated data), with 1 and with 8 GPUs.
//
//	go run ./bench/report
package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gpuattest/gpuattest/internal/reportfixture"
	"github.com/gpuattest/gpuattest/pipeline/report"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
)

func main() {
	fmt.Println("report of a run: 3 benchmark cases x 1,000 samples a side, 1 h burn-in telemetry at 1 s (median of 5)")
	fmt.Printf("%-6s %12s %12s %12s %12s %10s\n", "GPUs", "read", "HTML", "total", "HTML size", "goal")
	for _, gpus := range []int{1, 8} {
		if err := measure(gpus); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
}

func measure(gpus int) error {
	dir, err := os.MkdirTemp("", "gpuattest-bench-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := reportfixture.Write(dir, reportfixture.Options{Samples: 1000, Telemetry: time.Hour, GPUs: gpus}); err != nil {
		return err
	}
	var reads, htmls, totals []time.Duration
	size := 0
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		run, err := rundir.Open(dir)
		if err != nil {
			return err
		}
		rep, err := report.FromRun(run)
		if err != nil {
			return err
		}
		t1 := time.Now()
		var b bytes.Buffer
		if err := rep.WriteHTML(&b); err != nil {
			return err
		}
		t2 := time.Now()
		reads, htmls, totals = append(reads, t1.Sub(t0)), append(htmls, t2.Sub(t1)), append(totals, t2.Sub(t0))
		size = b.Len()
	}
	goal := "ok"
	if median(totals) >= time.Second || size >= 2<<20 {
		goal = "MISSED"
	}
	fmt.Printf("%-6d %12s %12s %12s %9.2f MB %10s\n", gpus, median(reads).Round(time.Millisecond), median(htmls).Round(time.Millisecond),
		median(totals).Round(time.Millisecond), float64(size)/1e6, goal)
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
