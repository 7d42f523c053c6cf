// Command spin is a real CPU workload for benchmark tests: each sample
// times a fixed amount of arithmetic (-work iterations of an xorshift
// loop), so two invocations with different -work differ by a known amount
// of work, whatever the machine. It reads GPUATTEST_REPEATS and
// GPUATTEST_WARMUP like the kernel harness and writes gpuattest results
// JSON with one case, "spin".
//
//	go run ./testdata/spin -work 200000 -out results.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink uint64

func spin(n int) {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink += x
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func main() {
	work := flag.Int("work", 200000, "loop iterations per sample")
	out := flag.String("out", "results.json", "results file")
	flag.Parse()
	warmup, repeats := envInt("GPUATTEST_WARMUP", 2), envInt("GPUATTEST_REPEATS", 20)
	for range warmup {
		spin(*work)
	}
	samples := make([]float64, 0, repeats)
	for range repeats {
		t0 := time.Now()
		spin(*work)
		samples = append(samples, float64(max(1, time.Since(t0).Nanoseconds())))
	}
	res := map[string]any{
		"schema": "https://gpuattest.dev/results/v1", "tool": "spin 1", "backend": "cpu",
		"cases": []any{map[string]any{"name": "spin", "kernel": "spin", "status": "passed", "samples_ns": samples, "flops": float64(3 * *work)}},
	}
	b, _ := json.Marshal(res)
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if err := os.Rename(tmp, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
}
