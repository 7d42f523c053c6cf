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
	if code := run([]string{"-verify", "default policy: exit 12", dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasPrefix(lines[0], "SIMULATED:") {
		t.Errorf("first line %q does not say SIMULATED", lines[0])
	}
	sections := map[string]bool{}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) < 2 || f[1] != "[SIMULATED]" {
			t.Errorf("row not labelled simulated: %q", l)
			continue
		}
		sections[f[0]] = true
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
