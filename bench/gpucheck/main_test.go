package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline/suite"

	"github.com/gpuattest/gpuattest/internal/reportfixture"
)

// TestTable prints the table of a simulated run (the report fixture):
// every section is there and every row says SIMULATED.
func TestTable(t *testing.T) {
	dir := t.TempDir()
	if err := reportfixture.Write(dir, reportfixture.Options{GPUs: 2}); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	// A verification with long FAIL lines (one contains ';') is a row per
	// line, each broken between words: the table stays narrow.
	long := "FAIL coverage work/build/a.fatbin, work/build/b.fatbin and 1 more: sm_80 sm_80 missing: " + strings.Repeat("no passed test ran on a GPU of compute capability 8.0; ", 8)
	verify := "default policy: exit 12: Verification FAILED: policy failed (exit 12)\n  " + long + "\n  FAIL policy bundle:1: hardware not simulated"
	if code := run([]string{"-verify", verify, dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasPrefix(lines[0], "SIMULATED:") {
		t.Errorf("first line %q does not say SIMULATED", lines[0])
	}
	sections := map[string]bool{}
	var verifyText []string
	for _, l := range lines[2:] {
		if len(l) > 200 {
			t.Errorf("row of %d bytes: %q", len(l), l)
		}
		if f := strings.Fields(l); len(f) > 3 && f[0] == "attestation" {
			verifyText = append(verifyText, f[3:]...)
		}
		f := strings.Fields(l)
		if len(f) < 2 || f[1] != "[SIMULATED]" {
			t.Errorf("row not labelled simulated: %q", l)
			continue
		}
		sections[f[0]] = true
	}
	if got, want := strings.Join(verifyText, " "), strings.Join(strings.Fields(verify), " "); got != want {
		t.Errorf("the attestation rows read\n%s\nwant\n%s", got, want)
	}
	for _, s := range []string{"device", "benchmark", "burn-in", "health", "attestation", "run"} {
		if !sections[s] {
			t.Errorf("no %s section in:\n%s", s, out.String())
		}
	}
	if code := run([]string{"-require-passed", "kernels,publish", dir}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "step publish did not pass") {
		t.Errorf("require-passed: exit %d, %s", code, errs.String())
	}
}

// A run over every GPU of a node prints one row per GPU for validation
// and burn-in (power against the limit), the failing case by UUID, and
// the cross-GPU comparison.
func TestTablePerGPU(t *testing.T) {
	var out bytes.Buffer
	tb := &table{w: tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)}
	res := &suite.Results{CrossDevice: &suite.CrossDevice{Devices: 8, CasesCompared: 4, Disagreements: []string{"sgemm/gpu=5 on gpu 5 (GPU-5): output differs"}}}
	for i := range 8 {
		d := suite.ResultDevice{Ordinal: i, Name: "NVIDIA H100 80GB HBM3", UUID: fmt.Sprintf("GPU-%d", i), Cases: 4, Passed: 4}
		if i == 5 {
			d.Passed = 3
			res.Cases = append(res.Cases, suite.Case{Name: "sgemm/gpu=5", Status: suite.StatusFailed, Message: "output differs [gpu 5 (GPU-5)]"})
		}
		res.Cases = append(res.Cases, suite.Case{Name: fmt.Sprintf("memsweep/fraction=0.85/gpu=%d", i), Kernel: "memsweep", Status: suite.StatusPassed,
			Config: map[string]string{"device_ordinal": fmt.Sprint(i), "device_uuid": d.UUID, "bytes_covered": "68000000000", "free_bytes": "80000000000", "passes": "4"}})
		res.Devices = append(res.Devices, d)
		idx, limit, peak, duty, loaded := i, 700.0, 690.0, 0.99, i != 5
		if i == 5 {
			peak = 300
		}
		tb.burninGPU(suite.BurninGPU{Index: &idx, UUID: d.UUID, PowerMaxWatts: &peak, PowerLimitWatts: &limit, DutyCycle: &duty, Loaded: &loaded})
	}
	tb.perGPU("kernels", res)
	tb.w.Flush()
	rows, seen := map[string]int{}, map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(l)
		key := strings.Join(f[:3], " ")
		if seen[key] { // a long value goes on over several rows
			continue
		}
		seen[key] = true
		rows[f[0]]++
		if f[0] == "burn-in" && f[2] == "5" && (!strings.Contains(l, "peak 300 W of 700 W limit (43 %)") || !strings.HasSuffix(l, "failed")) {
			t.Errorf("gpu 5's burn-in row: %q", l)
		}
		if f[0] == "memory-sweep" && (!strings.Contains(l, "swept of") || !strings.Contains(l, "(85.0 %)")) {
			t.Errorf("memory sweep row: %q", l)
		}
		if f[0] == "kernels" && f[1] == "cross-GPU" && !strings.HasSuffix(l, "failed") {
			t.Errorf("cross-GPU row: %q", l)
		}
	}
	// 8 GPU rows + the failed case + the comparison; 8 sweep rows; 8
	// burn-in rows.
	if rows["kernels"] != 10 || rows["memory-sweep"] != 8 || rows["burn-in"] != 8 {
		t.Errorf("rows %v:\n%s", rows, out.String())
	}
}

// The burn-in's "kernel code" row counts the GPUs by what the harness
// loaded for its burn kernel; cases that say nothing are left out.
func TestKernelCode(t *testing.T) {
	res := &suite.Results{Cases: []suite.Case{
		{Kernel: "burn", Config: map[string]string{"code": "cubin sm_90"}},
		{Kernel: "burn", Config: map[string]string{"code": "ptx (JIT)"}},
		{Kernel: "burn", Config: map[string]string{"code": "cubin sm_90"}},
		{Kernel: "sgemm", Config: map[string]string{"checksum_code": "cubin sm_90"}},
		{Kernel: "burn"},
	}}
	if got, want := kernelCode(res), "cubin sm_90 on 2 GPU(s), ptx (JIT) on 1 GPU(s)"; got != want {
		t.Errorf("kernelCode = %q, want %q", got, want)
	}
	if got := kernelCode(&suite.Results{}); got != "" {
		t.Errorf("kernelCode of no cases = %q, want empty", got)
	}
}

// The burn-in and benchmark rows show each GPU's burn throughput, its
// median power over the loop and every floor applied, with its model,
// floor, peak and what the GPU reached, or why it was not judged.
func TestTableFloors(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	tb := &table{w: tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)}
	idx, tflops, med, median, limit, loaded := 0, 410.0, 405.0, 640.0, 700.0, true
	tb.burninGPU(suite.BurninGPU{Index: &idx, UUID: "GPU-0", PowerMaxWatts: &limit, PowerMedianWatts: &median, PowerLimitWatts: &limit, Loaded: &loaded,
		BurnKernel: "hmma", BurnTFLOPS: &tflops, BurnNodeMedianTFLOPS: &med})
	reached, bw := 410e12, 2.1e12
	tb.floors("burn-in", []attest.AppliedFloor{{GPU: "GPU-0", Model: "H100 SXM", Metric: "tensor_fp16", Min: 396e12, Peak: 989.4e12, Measured: &reached, Verdict: attest.FloorPassed}})
	tb.floors("benchmark", []attest.AppliedFloor{
		{GPU: "GPU-0", Model: "H100 SXM", Metric: "memory_bandwidth", Min: 2.345e12, Peak: 3.35e12, Measured: &bw, Verdict: attest.FloorFailed},
		{GPU: "GPU-1", Metric: "memory_bandwidth", Measured: &bw, Verdict: attest.FloorNotJudged, Note: "no floor: not judged"},
	})
	tb.w.Flush()
	for _, want := range []string{
		"median 640 W over the loop, peak 700 W of 700 W limit (median 91 %)",
		"burn hmma 410 TFLOP/s",
		"(101 % of the node's median)",
		"floor tensor_fp16    GPU-0: H100 SXM floor 396 TFLOP/s of peak 989.4 TFLOP/s, reached 410 TFLOP/s",
		"floor memory_bandwidth  GPU-0: H100 SXM floor 2345 GB/s of peak 3350 GB/s, reached 2100 GB/s",
		"GPU-1: reached 2100 GB/s (no floor: not judged)",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
