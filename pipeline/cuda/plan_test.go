package cuda

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/pipeline"
)

// TestPlanPTXIsPortable: the PTX a fatbin embeds for the highest target is
// plain compute_XY even when that target is architecture-specific, since
// compute_90a PTX cannot be JIT-compiled for any later GPU.
func TestPlanPTXIsPortable(t *testing.T) {
	t.Parallel()
	p := &pipeline.Pipeline{Targets: []string{"sm_90a", "sm_80", "sm_100a"}, Steps: []pipeline.Step{{Sources: []string{"k.cu"}}}}
	jobs, err := Plan(p, &p.Steps[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nvcc", "-fatbin",
		"-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_100a,code=sm_100a",
		"-gencode", "arch=compute_100,code=compute_100", "-o", "build/k.fatbin", "k.cu"}
	if diff := cmp.Diff(want, jobs[0].Args); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
}

func TestDepArgsAndParseDeps(t *testing.T) {
	t.Parallel()
	j := Job{Source: "k.cu", Args: []string{"nvcc", "-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-O3", "-o", "build/k.fatbin", "k.cu"}}
	if got := strings.Join(DepArgs(j), " "); got != "nvcc -M -gencode arch=compute_80,code=sm_80 -O3 k.cu" {
		t.Errorf("DepArgs = %s", got)
	}
	deps, err := ParseDeps([]byte("k.o : k.cu \\\n    /usr/include/a.h \\\n    inc/my\\ file.h dir/$$x.h k.cu\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deps, "|"); got != "k.cu|/usr/include/a.h|inc/my file.h|dir/$x.h" {
		t.Errorf("ParseDeps = %s", got)
	}
	if _, err := ParseDeps([]byte("no rule here\n")); err == nil {
		t.Error("ParseDeps accepted a line with no rule")
	}
	if got := ccbin([]string{"-O3", "-ccbin", "./cc.sh"}); got != "./cc.sh" {
		t.Errorf("ccbin = %q", got)
	}
	if got := strings.Join(withoutCCBin([]string{"-O3", "-ccbin", "./cc.sh", "--compiler-bindir=/x", "-g"}), " "); got != "-O3 -g" {
		t.Errorf("withoutCCBin = %q", got)
	}
}
