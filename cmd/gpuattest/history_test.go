package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
)

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
