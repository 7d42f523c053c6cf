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
