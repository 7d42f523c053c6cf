package slurm

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

// TestSbatchConstraintArch: a class's arch is a node feature of its name,
// required beside the class's own constraint (grouped when that has an
// OR in it); a class without one adds nothing.
func TestSbatchConstraintArch(t *testing.T) {
	e, err := New("gpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ constraint, arch, want string }{
		{"sm_90", "arm64", "--constraint=sm_90&arm64"},
		{"", "arm64", "--constraint=arm64"},
		{"sm_80|sm_90", "arm64", "--constraint=(sm_80|sm_90)&arm64"},
		{"sm_90", "", "--constraint=sm_90"},
		{"", "", ""},
	} {
		req := fleet.Request{Name: "gpuattest-gh200", Class: "gh200", Count: 1, Job: fleet.ScriptJob{Script: "/s/job.sh"},
			Selectors: fleet.Selectors{GPUType: "gh200", GPUs: 1, Arch: tt.arch, Placement: Placement{Constraint: tt.constraint}}}
		args := e.SbatchArgs(req, 0)
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--constraint=") })
		got := ""
		if i >= 0 {
			got = args[i]
		}
		if got != tt.want {
			t.Errorf("constraint %q, arch %q: %q, want %q (args %v)", tt.constraint, tt.arch, got, tt.want, args)
		}
	}
}
