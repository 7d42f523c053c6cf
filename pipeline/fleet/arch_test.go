package fleet_test

import (
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines"
)

// TestClassArch: a class's arch selects its nodes and its platform
// (linux/amd64 when it names none); an arch gpuattest does not build for
// the fleet is refused at its field path.
func TestClassArch(t *testing.T) {
	const head = "apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: slurm\nsharedDir: /shared\nclasses:\n"
	s, err := fleet.Parse("fleet.yaml", []byte(head+"  - {name: gh200, gres: gpu:gh200:1, arch: arm64, targets: [sm_90]}\n  - {name: h100, gres: gpu:h100:8, targets: [sm_90]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	gh, h := s.Classes[0], s.Classes[1]
	if gh.Selectors.Arch != "arm64" || gh.Platform() != "linux/arm64" || h.Selectors.Arch != "" || h.Architecture() != fleet.DefaultArch || h.Platform() != "linux/amd64" {
		t.Errorf("gh200: arch %q platform %s; h100: arch %q, %s, platform %s", gh.Selectors.Arch, gh.Platform(), h.Selectors.Arch, h.Architecture(), h.Platform())
	}
	_, err = fleet.Parse("fleet.yaml", []byte(head+"  - {name: p, gres: gpu:p100:1, arch: ppc64le, targets: [sm_60]}\n"))
	if err == nil || !strings.Contains(err.Error(), "fleet.yaml:6:39:") || !strings.Contains(err.Error(), `arch "ppc64le": expected one of amd64, arm64`) {
		t.Errorf("arch ppc64le: %v, want it refused at its position", err)
	}
}
