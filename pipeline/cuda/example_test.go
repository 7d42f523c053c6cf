package cuda_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// ExamplePlan shows the nvcc command a cuda-build step runs: one -gencode
// per pinned target and PTX for the highest.
func ExamplePlan() {
	p := &pipeline.Pipeline{Targets: []string{"sm_90", "sm_80"}, Steps: []pipeline.Step{{
		ID: "kernels", Kind: "cuda-build", Sources: []string{"sgemm.cu"}, Flags: []string{"-O3"},
	}}}
	jobs, err := cuda.Plan(p, &p.Steps[0])
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.Join(jobs[0].Args, " "))
	// Output:
	// nvcc -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 -O3 -o build/sgemm.fatbin sgemm.cu
}

// ExampleCheckStep shows the refusal of a flag that adds an architecture.
func ExampleCheckStep() {
	p := &pipeline.Pipeline{Targets: []string{"sm_80", "sm_90"}, Steps: []pipeline.Step{{
		ID: "kernels", Kind: "cuda-build", Sources: []string{"sgemm.cu"}, Flags: []string{"-arch=sm_86"},
	}}}
	fmt.Println(cuda.CheckStep(p, 0))
	// Output:
	// steps[0].flags[0]: "-arch=sm_86" adds architecture sm_86, which is not a pinned target (targets: [sm_80, sm_90])
	// hint: remove the flag, or add sm_86 to the pipeline's targets so it is built and attested like the others
}

// ExampleInspect lists what a fatbin holds. (Not run: it needs cuobjdump
// and a built fatbin.)
func ExampleInspect() {
	in, err := cuda.Inspect(context.Background(), &runner.Host{}, "kernels/build/sgemm.fatbin")
	if err != nil {
		panic(err)
	}
	fmt.Println(in.SASS, in.PTX, in.CubinDigests()["sm_90"])
}
