package kernels_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// Sustained mode on the CPU backend: one process, every case launched
// back to back on every worker thread for the duration, every repeat's
// output compared byte for byte with the first.
func TestSustainedCPU(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := runHarness(t, []string{"GPUATTEST_DURATION=1.5"}, "--backend", "cpu", "--threads", "2", "--repeats", "3")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if time.Since(start) < 1500*time.Millisecond {
		t.Errorf("a 1.5 s sustained run returned after %v", time.Since(start))
	}
	s := r.results.Sustained
	if s == nil {
		t.Fatalf("GPUATTEST_DURATION did not start a sustained run:\n%s", r.stderr)
	}
	if s.Timing != suite.TimingSteadyClock || s.Check != "bytes" || s.Threads != 2 || s.DurationSeconds != 1.5 || s.ElapsedSeconds < 1.5 ||
		!(s.DutyCycle > 0 && s.DutyCycle <= 1) || s.BusySeconds <= 0 || s.CPUSeconds == nil || *s.CPUSeconds <= 0 ||
		s.Iterations < 1 || !s.Consistent || s.Mismatches != 0 || s.Error != "" {
		t.Errorf("sustained %+v", s)
	}
	checkSustainedCases(t, r.results, s)
	for _, m := range s.Memory {
		if m.HostRSSBytes <= 0 || m.DeviceUsedBytes != 0 {
			t.Errorf("memory sample %+v: want host RSS only", m)
		}
	}
	if !strings.Contains(r.stderr, "duty cycle") {
		t.Errorf("stderr does not report the duty cycle:\n%s", r.stderr)
	}
}

// Every repeat is checked, not only the last: a repeat in the middle that
// differs fails its case and names the repeat.
func TestSustainedCPUCatchesOneBadRepeat(t *testing.T) {
	t.Parallel()
	// No burn case: on a loaded machine its share of each round could
	// leave softmax short of a third repeat in 0.5 s.
	r := runHarness(t, nil, "--backend", "cpu", "--duration", "0.5", "--threads", "1", "--no-burn", "--inject-inconsistency", "softmax")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	s := r.results.Sustained
	if s == nil || s.Consistent || s.Mismatches != 1 || s.OutputsChecked < 4 {
		t.Fatalf("sustained %+v; want one mismatch among all checked outputs", s)
	}
	for _, c := range r.results.Cases {
		if c.Kernel != "softmax" {
			if c.Status != "passed" {
				t.Errorf("%s: %s %q", c.Name, c.Status, c.Message)
			}
			continue
		}
		if c.Status != "failed" || c.Sustained == nil || c.Sustained.FirstMismatch != 3 || c.Sustained.Mismatches != 1 || c.Sustained.Repeats < 4 ||
			!strings.Contains(c.Message, "the output of repeat 3 differs from repeat 1 (1 of ") {
			t.Errorf("%s: %s %q %+v; want failed at repeat 3, later repeats matching again", c.Name, c.Status, c.Message, c.Sustained)
		}
	}
}

func TestSustainedUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--duration", "0"}, {"--duration", "-1"}, {"--threads", "0"}, {"--inject-inconsistency", "softmax"}, {"--inject-illegal-address", "conv2d"}} {
		r := runHarness(t, nil, append([]string{"--backend", "cpu"}, args...)...)
		if r.code != 2 || r.results != nil || !strings.Contains(r.stderr, "hint:") {
			t.Errorf("%v: exit %d, results written %v, stderr %q; want a usage error", args, r.code, r.results != nil, r.stderr)
		}
	}
}

// The CPU backend simulates a lost context (--inject-illegal-address), so
// the run loop's handling is tested where no GPU is.
func TestContextLossCPU(t *testing.T) {
	t.Parallel()
	r := runHarness(t, nil, "--backend", "cpu", "--repeats", "1", "--inject-illegal-address", "reduce_sum")
	checkContextLoss(t, r, "reduce_sum", "simulated illegal address", false)
	r = runHarness(t, nil, "--backend", "cpu", "--duration", "0.5", "--inject-illegal-address", "sgemm")
	checkContextLoss(t, r, "sgemm", "simulated illegal address", true)
	if s := r.results.Sustained; s == nil || s.Consistent || !strings.Contains(s.Error, "context lost after sgemm") {
		t.Errorf("sustained %+v; want an error naming the lost context", s)
	}
}
