package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostile are escape sequences a results file may carry in case names
// and messages: a window title (OSC 0 ... BEL), an erased line (CSI 2K)
// and a fake green PASS (SGR colours).
const hostile = "\x1b]0;owned\x07\x1b[2K\r\x1b[32mPASS\x1b[0m"

// TestEscapesInResults: escape bytes in a results file's case names and
// messages reach neither run's progress and summary (plain output, and
// -v logs) nor report's summary.md, where $ (GitHub math) and bare URLs
// (autolinks) are neutralised too.
func TestEscapesInResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	results := map[string]any{
		"schema": "https://gpuattest.dev/results/v1", "tool": "t", "backend": "cpu",
		"cases": []map[string]any{
			{"name": "ok" + hostile, "status": "passed"},
			{"name": "bad" + hostile, "status": "failed", "message": "error " + hostile + " costs $5 $x^2$ see https://evil.example/x www.evil.example a@evil.example"},
		},
	}
	b, err := json.Marshal(results)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(pipe, []byte("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: t\nsteps:\n  - id: unit\n    kind: test\n    run: cp cases.json results.json\n    results: results.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "r")
	code, out, errOut := cli(t, "run", pipe, "--out", runDir, "-v")
	if code == 0 || !strings.Contains(out, "bad") {
		t.Fatalf("run: exit %d, want a failure naming the case\n%s%s", code, out, errOut)
	}
	raw := func(where, s string) {
		t.Helper()
		if i := strings.IndexAny(s, "\x1b\x07\r\x9b"); i >= 0 {
			t.Errorf("%s holds a raw control byte %q at %d:\n%q", where, s[i], i, s)
		}
	}
	raw("run's stdout", out)
	raw("run's stderr", errOut)
	md := filepath.Join(dir, "summary.md")
	if code, out, errOut := cli(t, "report", runDir, "--markdown", md, "--html", filepath.Join(dir, "r.html")); code != 0 {
		t.Fatalf("report: exit %d\n%s%s", code, out, errOut)
	}
	mb, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	s := string(mb)
	raw("summary.md", s)
	if !strings.Contains(s, "bad") {
		t.Fatalf("summary.md does not name the failed case:\n%s", s)
	}
	for _, bad := range []string{"$5", "$x", "https://evil", "www.evil", "a@evil"} {
		if strings.Contains(s, bad) {
			t.Errorf("summary.md holds %q as is (math or an autolink on GitHub):\n%s", bad, s)
		}
	}
}
