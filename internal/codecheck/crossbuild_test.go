package codecheck

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// crossTargets are the platforms a verifier runs on (issue 36): the
// release targets, each built without cgo.
var crossTargets = []string{"darwin/arm64", "darwin/amd64", "windows/amd64", "linux/amd64", "linux/arm64"}

// portable are the packages that must build and vet on every cross
// target without cgo: the verifier library and the packages under it
// whose platform calls sit behind build-tagged files with portable
// fallbacks (durable writes, exclusive locks, process groups).
// cmd/gpuattest is among them: pipeline/gpu keeps go-nvml behind
// linux && cgo, and the verbs that need NVML refuse elsewhere, naming
// the platform (issue 36, item 2).
var portable = []string{"./attest/...", "./internal/flock", "./pipeline/runner", "./pipeline/image", "./pipeline/gpu", "./cmd/gpuattest"}

// TestCrossBuild builds and vets the portable packages for every cross
// target with CGO_ENABLED=0. go build of a library package compiles
// without linking and go vet type-checks it with its tests, so together
// they fail on any compile error on that platform; both share the build
// cache (GOFLAGS=-trimpath, as releases are built), so a warm run costs
// seconds. Skipped with -short.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds five targets; skipped with -short")
	}
	for _, target := range crossTargets {
		goos, goarch, _ := strings.Cut(target, "/")
		env := append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=-trimpath")
		for _, verb := range []string{"build", "vet"} {
			cmd := exec.Command("go", append([]string{verb}, portable...)...)
			cmd.Dir = "../.."
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("GOOS=%s GOARCH=%s CGO_ENABLED=0 go %s %s: %v\n%s\nhint: put the platform call in a build-tagged file (name_linux.go) with a portable fallback (name_other.go) that keeps its guarantee",
					goos, goarch, verb, strings.Join(portable, " "), err, out)
			}
		}
	}
}
