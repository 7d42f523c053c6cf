package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// maxInitAllocs bounds the allocations of any one package's init, but
// for the upstream packages in initAllocAllowlist. The largest of the
// others is about 1,000 (go-openapi/strfmt).
const maxInitAllocs = 2000

// initAllocAllowlist names the upstream packages whose init is known to
// allocate more than maxInitAllocs, each with why it is linked and the
// allocations measured (GODEBUG=inittrace=1, Go 1.26, linux/amd64). They
// are upstream's as released: gpuattest forks no dependency (issue 22).
// Each entry bounds that package's init at its own figure, so that one
// growing is still caught; an entry no longer linked fails the test, so
// that the list shrinks as the dependency goes.
var initAllocAllowlist = map[string]struct {
	max    int
	reason string
}{
	"github.com/asaskevich/govalidator": {
		max:    7500,
		reason: "its package variables compile 44 regular expressions (about 6,200 allocations); linked only through sigstore-go's Rekor transparency-log packages",
	},
}

// TestInitAllocations runs this test binary again with
// GODEBUG=inittrace=1, which prints every package init's allocations
// (counts, not times: they do not depend on the machine), and fails on a
// package whose init allocates more than maxInitAllocs (or, for a
// package in initAllocAllowlist, its entry's bound): work that belongs in
// a sync.OnceValue, paid by every gpuattest start.
func TestInitAllocations(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("running the test binary: %v\n%s", err, stderr.Bytes())
	}
	n := 0
	seen := map[string]bool{}
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @0.5 ms, 0.1 ms clock, 9216 bytes, 3 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "init" || f[len(f)-1] != "allocs" {
			continue
		}
		n++
		allocs, err := strconv.Atoi(f[len(f)-2])
		if err != nil {
			t.Fatalf("unexpected inittrace line %q", sc.Text())
		}
		limit := maxInitAllocs
		if a, ok := initAllocAllowlist[f[1]]; ok {
			limit = a.max
			seen[f[1]] = true
		}
		if allocs > limit {
			t.Errorf("package %s allocates %d objects in its init, want at most %d\nhint: compile or build it on first use (sync.OnceValue); for a dependency, send the fix upstream or stop needing it (no forks, no replace lines)", f[1], allocs, limit)
		}
	}
	for pkg, a := range initAllocAllowlist {
		if !seen[pkg] {
			t.Errorf("initAllocAllowlist names %s (%s), which this binary no longer initialises\nhint: remove its entry", pkg, a.reason)
		}
	}
	if n < 100 {
		t.Fatalf("read %d init lines from GODEBUG=inittrace=1, want the hundreds gpuattest links:\n%s", n, stderr.Bytes())
	}
}

// TestNoCollectionDuringInit runs this test binary again with
// GODEBUG=gctrace=1,inittrace=1 and fails when a garbage collection cycle
// starts before the last package init: the inits allocate about 3.5 MB,
// which without internal/initgc holding the collector off started a cycle
// in the middle of every gpuattest start (a few milliseconds on two
// cores). The test binary never calls main, so the collector stays off
// here after init too; what is checked is the inits alone.
func TestNoCollectionDuringInit(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1,inittrace=1", "GOGC=100")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("running the test binary: %v\n%s", err, stderr.Bytes())
	}
	lines := strings.Split(stderr.String(), "\n")
	lastInit := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "init ") {
			lastInit = i
		}
	}
	if lastInit < 100 {
		t.Fatalf("read %d lines before the last init from GODEBUG=inittrace=1, want the hundreds gpuattest links", lastInit)
	}
	for _, l := range lines[:lastInit] {
		if strings.HasPrefix(l, "gc ") {
			t.Errorf("a collection started during package init: %s\nhint: internal/initgc must stay imported by main, and its path must sort before the heavy packages' (Go initializes the lexically first ready package)", l)
		}
	}
}

// TestCollectorOnInTests: the test binary's main is TestMain, not main, so
// it must give the collector back itself; held off, the package's heap
// grew to 23 GB over an hour of tests and the machine swapped until the
// test timeout killed it.
func TestCollectorOnInTests(t *testing.T) {
	old := debug.SetGCPercent(100)
	debug.SetGCPercent(old)
	if old < 0 {
		t.Fatalf("the collector is off in the test process (GC percent %d)\nhint: TestMain must call initgc.Restore first", old)
	}
}
