package pipeline

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheckCUDABuild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		release bool
		targets []string
		step    Step
		want    []string // "path: substring of message"
	}{
		{name: "clean", step: Step{Sources: []string{"a.cu", "dir/b.cu"}, Flags: []string{"-O3", "-ccbin", "g++-11", "--use_fast_math", "-Xptxas", "-v"}}},
		{name: "gencode sneaks in sm_86", step: Step{Sources: []string{"a.cu"}, Flags: []string{"-O3", "-gencode=arch=compute_86,code=sm_86"}},
			want: []string{"steps[0].flags[1]: adds architecture sm_86, which is not a pinned target"}},
		{name: "separate arch value", step: Step{Sources: []string{"a.cu"}, Flags: []string{"-arch", "sm_86", "-O2"}},
			want: []string{"steps[0].flags[0]: adds architecture sm_86"}},
		{name: "generate-code long form", step: Step{Sources: []string{"a.cu"}, Flags: []string{"--generate-code", "arch=compute_89,code=[sm_89,compute_89]"}},
			want: []string{"steps[0].flags[0]: adds architecture sm_89"}},
		{name: "native", step: Step{Sources: []string{"a.cu"}, Flags: []string{"-arch=native"}},
			want: []string{"steps[0].flags[0]: builds for whatever GPUs"}},
		{name: "all-major", step: Step{Sources: []string{"a.cu"}, Flags: []string{"--gpu-architecture=all-major"}},
			want: []string{"steps[0].flags[0]: builds for whatever GPUs"}},
		{name: "pinned arch still refused", step: Step{Sources: []string{"a.cu"}, Flags: []string{"-code=sm_80"}},
			want: []string{"steps[0].flags[0]: selects architectures"}},
		{name: "output flags", step: Step{Sources: []string{"a.cu"}, Flags: []string{"-o", "x", "-cubin"}},
			want: []string{"steps[0].flags[0]: decides nvcc's output", "steps[0].flags[2]: decides nvcc's output"}},
		{name: "debug allowed outside release", step: Step{Sources: []string{"a.cu"}, Flags: []string{"-G", "-lineinfo"}}},
		{name: "debug refused in release", release: true, step: Step{Sources: []string{"a.cu"}, Flags: []string{"-G", "-lineinfo", "-g"}},
			want: []string{"steps[0].flags[0]: is refused in a release pipeline", "steps[0].flags[1]: is refused in a release pipeline", "steps[0].flags[2]: is refused in a release pipeline"}},
		{name: "colliding outputs", step: Step{Sources: []string{"a/k.cu", "b/k.cu"}},
			want: []string{"steps[0].sources[1]: would both write k.*"}},
		{name: "escaping source", step: Step{Sources: []string{"../k.cu", "/abs/k2.cu"}},
			want: []string{"steps[0].sources[0]: is outside", "steps[0].sources[1]: is outside"}},
		{name: "no sources, bad enums", step: Step{Output: "exe", Reproducible: "yes"},
			want: []string{"steps[0].sources: needs at least one source", "steps[0].output: unknown output", "steps[0].reproducible: unknown value"}},
		{name: "no targets", targets: []string{}, step: Step{Sources: []string{"a.cu"}},
			want: []string{"targets: no pinned targets"}},
		{name: "bad target", targets: []string{"sm80"}, step: Step{Sources: []string{"a.cu"}},
			want: []string{"targets: target \"sm80\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			targets := tt.targets
			if targets == nil {
				targets = []string{"sm_80", "sm_90"}
			}
			tt.step.ID = "build"
			tt.step.Kind = "cuda-build"
			p := &Pipeline{Release: tt.release, Targets: targets, Steps: []Step{tt.step}}
			got := CheckCUDABuild(p, 0)
			if len(got) != len(tt.want) {
				t.Fatalf("CheckCUDABuild: got %d issues, want %d:\n%v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				path, sub, _ := strings.Cut(w, ": ")
				if got[i].Path != path || !strings.Contains(got[i].Message, sub) {
					t.Errorf("issue %d = %q, want path %q and message containing %q", i, got[i].String(), path, sub)
				}
				if strings.Contains(w, "sm_86") && !strings.Contains(got[i].Hint, "add sm_86 to the pipeline's targets") {
					t.Errorf("issue %d hint = %q, want it to say how to add sm_86", i, got[i].Hint)
				}
			}
		})
	}
}

// ExampleCheckCUDABuild shows the refusal of a flag that adds an
// architecture.
func ExampleCheckCUDABuild() {
	p := &Pipeline{Targets: []string{"sm_80", "sm_90"}, Steps: []Step{{
		ID: "kernels", Kind: "cuda-build", Sources: []string{"sgemm.cu"}, Flags: []string{"-arch=sm_86"},
	}}}
	fmt.Println(CheckCUDABuild(p, 0))
	// Output:
	// steps[0].flags[0]: "-arch=sm_86" adds architecture sm_86, which is not a pinned target (targets: [sm_80, sm_90])
	// hint: remove the flag, or add sm_86 to the pipeline's targets so it is built and attested like the others
}
