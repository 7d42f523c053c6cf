// Package kernels holds gpuattest's reference CUDA kernels (vector_add,
// reduce_sum, sgemm, softmax: one .cu file each, extern "C" entry points)
// and the C++ harness in harness/ that loads the built fatbins through the
// CUDA driver API, or runs CPU implementations with --backend cpu, and
// writes gpuattest results JSON. There is no Go code here; the Go tests
// build the harness and the kernels with the real toolchains and check
// what they produce.
package kernels
