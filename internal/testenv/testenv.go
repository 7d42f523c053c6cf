// Package testenv holds the test policy for external tools: a test that
// needs nvcc, docker or bwrap fails when CI=true and the tool is missing (so
// a green run cannot hide a missing install step) and skips elsewhere.
package testenv

import (
	"context"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// RequireTool returns the path of tool, or fails (in CI) or skips the test.
func RequireTool(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Missing(t, tool+" not found in PATH")
	}
	return p
}

// RequireDocker checks that a docker engine answers, within 20 seconds.
func RequireDocker(t testing.TB) {
	t.Helper()
	RequireTool(t, "docker")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		Missing(t, "docker engine not reachable: "+string(out))
	}
}

// Missing fails the test in CI and skips it elsewhere, with the reason.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true but %s (hint: .ci/install installs it)", reason)
	}
	t.Skipf("skipping: %s (set CI=true to make this a failure)", reason)
}

// RequireGoTool returns the path of tool in PATH or in $GOPATH/bin (where
// `go install` puts cosign and oras), or fails (in CI) or skips the test.
func RequireGoTool(t testing.TB, tool string) string {
	t.Helper()
	if p, err := exec.LookPath(tool); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	p := filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "bin", tool)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	Missing(t, tool+" not found in PATH or $GOPATH/bin")
	return ""
}

// DirOutside returns a new directory, removed when the test ends, that
// lies under none of avoid (absolute directories, such as the ones a
// sandbox replaces with empty scratch file systems): the package's own
// directory when the checkout lies outside them, else the test cache
// ($GPUATTEST_TEST_CACHE, /var/cache/gpuattest-test), /var/lib or /srv.
// A test that must see what a sandbox hides, or must not, builds its
// tree there: under /tmp the sandbox would hide it anyway, and the test
// would prove nothing. It fails under CI when none is writable, and
// skips elsewhere.
func DirOutside(t testing.TB, pattern string, avoid []string) string {
	t.Helper()
	cands := []string{".", os.Getenv("GPUATTEST_TEST_CACHE"), "/var/cache/gpuattest-test", "/var/lib", "/srv"}
	for _, c := range cands {
		if c == "" {
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		} else if c != "." {
			if os.MkdirAll(abs, 0o755) != nil {
				continue
			}
		}
		if underAny(abs, avoid) {
			continue
		}
		dir, err := os.MkdirTemp(abs, pattern)
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	Missing(t, "no writable directory outside "+strings.Join(avoid, ", "))
	return ""
}

// underAny reports whether p is one of dirs or inside one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if rel, err := filepath.Rel(d, p); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return true
		}
	}
	return false
}
