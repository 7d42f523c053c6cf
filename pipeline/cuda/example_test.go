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

// ExampleInspect lists what a fatbin holds. (Not run: it needs cuobjdump
// and a built fatbin.)
func ExampleInspect() {
	in, err := cuda.Inspect(context.Background(), &runner.Host{}, "kernels/build/sgemm.fatbin")
	if err != nil {
		panic(err)
	}
	fmt.Println(in.SASS, in.PTX, in.CubinDigests()["sm_90"])
}
