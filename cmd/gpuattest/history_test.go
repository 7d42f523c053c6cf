package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
)

// TestHistoryCLI: gpuattest history over two pushed releases with the
// same trust flags as verify REF (one of them under two tags: drawn once,
// flagged, with its signed run id and finish time); a wrong key leaves
// every release out, naming it; bad flags are usage errors. (pipeline/history's tests draw
// the series.)
func TestHistoryCLI(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	runDir, pub := fixtureRun(t, []runfixture.File{{Name: "build/a.fatbin", Size: 2048}})
	other, otherPub := fixtureRun(t, []runfixture.File{{Name: "build/b.fatbin", Size: 2048}})
	push(t, runDir, host+"/kernels:v1.9")
	push(t, runDir, host+"/kernels:v1.10")
	push(t, other, host+"/kernels:v1.11")
	dir := t.TempDir()
	html, bmf, csvFile := filepath.Join(dir, "h.html"), filepath.Join(dir, "h.bmf.json"), filepath.Join(dir, "h.csv")

	code, out, errOut := cli(t, "history", host+"/kernels", "--key", pub, "--policy", "builtin:cpu-tier", "--html", html, "--bmf", bmf, "--csv", csvFile, "-o", "json", "--no-bundle-cache")
	if code != 0 {
		t.Fatalf("history: exit %d\n%s%s", code, out, errOut)
	}
	var h struct {
		Releases []struct {
			Tag, Manifest string
			RunID         string `json:"run_id"`
			Tags, Flags   []string
		}
		Excluded []struct{ Tag, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// One run pushed under two tags is one release, flagged.
	if len(h.Releases) != 1 || h.Releases[0].Tag != "v1.9" || strings.Join(h.Releases[0].Tags, " ") != "v1.9 v1.10" ||
		h.Releases[0].RunID != "run" || len(h.Releases[0].Flags) != 1 || !strings.Contains(h.Releases[0].Flags[0], "is tagged v1.9, v1.10") {
		t.Errorf("releases %+v, want one, tagged v1.9 and v1.10, run id \"run\", flagged", h.Releases)
	}
	if len(h.Excluded) != 1 || h.Excluded[0].Tag != "v1.11" || !strings.Contains(h.Excluded[0].Reason, "signature") {
		t.Errorf("left out %+v, want v1.11 (signed with another key)", h.Excluded)
	}
	for _, f := range []string{html, bmf, csvFile} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}

	code, out, _ = cli(t, "history", host+"/kernels", "--key", pub, "--policy", "builtin:cpu-tier", "--no-bundle-cache")
	if code != 0 || !strings.Contains(out, "release  v1.9, v1.10  "+h.Releases[0].Manifest+": run run finished 2026-03-01T12:01:00Z on cpu") ||
		!strings.Contains(out, "FLAG  v1.9: manifest "+h.Releases[0].Manifest+" is tagged v1.9, v1.10") {
		t.Errorf("history: exit %d, want the release's tags, signed run and flag\n%s", code, out)
	}
	code, out, _ = cli(t, "history", host+"/kernels", "--key", otherPub, "--policy", "builtin:cpu-tier", "--limit", "2", "--no-bundle-cache")
	if code != 0 || !strings.Contains(out, "1 release(s) verified, 1 left out") || !strings.Contains(out, "LEFT OUT  v1.10: did not verify (signature)") {
		t.Errorf("history --limit 2 with the other key: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{
		{"history", host + "/kernels"},
		{"history", host + "/kernels", "--key", pub, "--jobs", "0"},
		{"history", host + "/kernels", "--key", pub, "--threshold", "0"},
		{"history", host + "/kernels", "--key", pub, "--limit", "-1"},
		{"history", "--key", pub},
	} {
		if code, _, errOut := cli(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, errOut)
		}
	}
}

// TestHistoryBundleCache: history keeps the bundles it read in the
// user's cache directory, and a second history, reading them from there,
// prints the same history; so does a third whose cached bundles were
// replaced by FIFOs (issue 30, item 10: open(2) waited on them forever).
func TestHistoryBundleCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	host := registrytest.StartInProcess(t, nil)
	runDir, pub := fixtureRun(t, []runfixture.File{{Name: "build/a.fatbin", Size: 2048}})
	push(t, runDir, host+"/kernels:v1")
	var outs []string
	for range 2 {
		code, out, errOut := cli(t, "history", host+"/kernels", "--key", pub, "--policy", "builtin:cpu-tier", "-o", "json")
		if code != 0 {
			t.Fatalf("history: exit %d\n%s%s", code, out, errOut)
		}
		outs = append(outs, out)
	}
	ents, err := os.ReadDir(filepath.Join(cache, "gpuattest", "bundles", "sha256"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("bundle cache: %v, %d files", err, len(ents))
	}
	if outs[0] != outs[1] {
		t.Errorf("the history read from the cache differs:\n%s\n%s", outs[0], outs[1])
	}
	for _, e := range ents {
		p := filepath.Join(cache, "gpuattest", "bundles", "sha256", e.Name())
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := mkfifo(p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // releases an open(2) waiting on it
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		})
	}
	done := make(chan string, 1)
	go func() {
		_, out, errOut := cli(t, "history", host+"/kernels", "--key", pub, "--policy", "builtin:cpu-tier", "-o", "json")
		done <- out + errOut
	}()
	select {
	case out := <-done:
		if out != outs[0] {
			t.Errorf("the history with FIFOs in the cache differs:\n%s\n%s", outs[0], out)
		}
	case <-time.After(time.Minute):
		t.Fatal("history with FIFOs planted in the bundle cache did not return in a minute")
	}
}
