package cuda

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/pipeline"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	no := false
	tests := []struct {
		name string
		step pipeline.Step
		want []Job
	}{
		{name: "fatbin with ptx", step: pipeline.Step{Sources: []string{"src/k.cu"}, Flags: []string{"-O3"}},
			want: []Job{{Source: "src/k.cu", Outputs: []string{"build/k.fatbin"}, Args: []string{"nvcc", "-fatbin",
				"-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_90,code=compute_90",
				"-O3", "-o", "build/k.fatbin", "src/k.cu"}}}},
		{name: "object without ptx", step: pipeline.Step{Sources: []string{"k.cu"}, Output: "object", PTX: &no, OutDir: "out/"},
			want: []Job{{Source: "k.cu", Outputs: []string{"out/k.o"}, Args: []string{"nvcc", "-c",
				"-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90", "-o", "out/k.o", "k.cu"}}}},
		{name: "cubin per target", step: pipeline.Step{Sources: []string{"k.cu"}, Output: "cubin"},
			want: []Job{
				{Source: "k.cu", Target: "sm_80", Outputs: []string{"build/k.sm_80.cubin"}, Args: []string{"nvcc", "-cubin", "-gencode", "arch=compute_80,code=sm_80", "-o", "build/k.sm_80.cubin", "k.cu"}},
				{Source: "k.cu", Target: "sm_90", Outputs: []string{"build/k.sm_90.cubin"}, Args: []string{"nvcc", "-cubin", "-gencode", "arch=compute_90,code=sm_90", "-o", "build/k.sm_90.cubin", "k.cu"}},
			}},
		{name: "ptx per target", step: pipeline.Step{Sources: []string{"k.cu"}, Output: "ptx"},
			want: []Job{
				{Source: "k.cu", Target: "sm_80", Outputs: []string{"build/k.compute_80.ptx"}, Args: []string{"nvcc", "-ptx", "-gencode", "arch=compute_80,code=compute_80", "-o", "build/k.compute_80.ptx", "k.cu"}},
				{Source: "k.cu", Target: "sm_90", Outputs: []string{"build/k.compute_90.ptx"}, Args: []string{"nvcc", "-ptx", "-gencode", "arch=compute_90,code=compute_90", "-o", "build/k.compute_90.ptx", "k.cu"}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Targets out of order: the plan sorts them.
			p := &pipeline.Pipeline{Targets: []string{"sm_90", "sm_80"}, Steps: []pipeline.Step{tt.step}}
			got, err := Plan(p, &p.Steps[0])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareArchs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		got, want []string
		wantMsg   string
	}{
		{name: "equal", got: []string{"sm_80", "sm_90"}, want: []string{"sm_80", "sm_90"}},
		{name: "extra", got: []string{"sm_80", "sm_86", "sm_90"}, want: []string{"sm_80", "sm_90"}, wantMsg: "SASS architectures [sm_80 sm_86 sm_90] do not match the expected [sm_80 sm_90]: extra sm_86"},
		{name: "missing", got: []string{"sm_80"}, want: []string{"sm_80", "sm_90"}, wantMsg: "SASS architectures [sm_80] do not match the expected [sm_80 sm_90]: missing sm_90"},
		{name: "both", got: []string{"sm_75"}, want: []string{"sm_80"}, wantMsg: "SASS architectures [sm_75] do not match the expected [sm_80]: extra sm_75, missing sm_80"},
	}
	for _, tt := range tests {
		if got := CompareArchs("SASS", tt.got, tt.want).String(); got != tt.wantMsg {
			t.Errorf("%s: CompareArchs = %q, want %q", tt.name, got, tt.wantMsg)
		}
	}
}

func TestPrintableRuns(t *testing.T) {
	t.Parallel()
	a := []byte("\x00\x01tmpxft_000020a7_00000000-6_main.cudafe1.cpp\x00short\x00common-string\x00")
	b := []byte("\x00\x01tmpxft_000020b2_00000000-6_main.cudafe1.cpp\x00short\x00common-string\x00")
	onlyA, onlyB := diffStrings(a, b)
	if diff := cmp.Diff([]string{"tmpxft_000020a7_00000000-6_main.cudafe1.cpp"}, onlyA); diff != "" {
		t.Errorf("only in first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tmpxft_000020b2_00000000-6_main.cudafe1.cpp"}, onlyB); diff != "" {
		t.Errorf("only in second (-want +got):\n%s", diff)
	}
	d := compareBytes("x", a, b)
	if d.Identical || d.FirstDifference != 15 || d.Note == "" {
		t.Errorf("compareBytes = %+v, want a difference at byte 15 with a not-ELF note", d)
	}
}

func TestCopyTreeSkips(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	for _, f := range []string{"k.cu", "inc/common.cuh", ".git/HEAD", ".cache/big", "runs/r1/steps/k/log", "build/k.fatbin", "build/other.txt"} {
		p := filepath.Join(src, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("k.cu", filepath.Join(src, "link.cu")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := copyTree(src, dst, []string{filepath.Join(src, "runs"), filepath.Join(src, "build", "k.fatbin")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	sort.Strings(got)
	if diff := cmp.Diff([]string{"build/other.txt", "inc/common.cuh", "k.cu", "link.cu"}, got); diff != "" {
		t.Errorf("copied files (-want +got):\n%s", diff)
	}
	if l, err := os.Readlink(filepath.Join(dst, "link.cu")); err != nil || l != "k.cu" {
		t.Errorf("symlink copied as %q, %v", l, err)
	}
}
