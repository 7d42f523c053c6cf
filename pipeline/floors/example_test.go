package floors_test

import (
	"fmt"

	"github.com/gpuattest/gpuattest/pipeline/floors"
)

// A GPU's model, by the name NVML gives it, and its floors.
func ExampleLookup() {
	m, ok := floors.Lookup("NVIDIA H100 80GB HBM3")
	fmt.Println(m.Name, ok)
	fmt.Println(m.Power.Min, "of the enforced power limit")
	fmt.Println(m.MemoryBandwidth.Min, "of", m.MemoryBandwidth.Peak)
	fmt.Println(m.TensorFP16.Min, "of", m.TensorFP16.Peak, "from the", m.TensorFP16.Source.Name)
	if _, ok := floors.Lookup("NVIDIA GeForce RTX 4090"); !ok {
		fmt.Println(floors.NotJudged)
	}
	// Output:
	// H100 SXM true
	// 85 % of the enforced power limit
	// 2345 GB/s of 3350 GB/s
	// 396 TFLOP/s of 989 TFLOP/s from the NVIDIA H100 Tensor Core GPU datasheet
	// no floor: not judged
}
