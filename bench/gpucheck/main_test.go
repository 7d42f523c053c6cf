package main

import (
	"bytes"
	"strings"
	"testing"

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
