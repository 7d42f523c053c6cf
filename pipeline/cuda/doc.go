// Package cuda builds CUDA device code for pinned targets and proves what
// was built.
//
// [Build] is the step executor of kind cuda-build: it runs nvcc through the
// step's runner with one explicit -gencode per pinned target ([Plan]),
// refuses a step that breaks the cuda-build rules
// ([pipeline.CheckCUDABuild]: flags that would change the architecture set
// or, in release mode, add debug information), inspects every artifact with cuobjdump ([Inspect]) and fails
// unless the embedded SASS set equals the pinned targets, and optionally
// builds a second time in another directory to check that the outputs are
// byte-for-byte reproducible ([CompareFiles] explains differences by ELF
// section and by embedded string).
//
// The package's files follow those jobs: plan.go (the nvcc command lines),
// env.go (nvcc's environment), jobs.go (running them, [RunJobs]),
// build.go (the executor), artifacts.go (checking what was built against
// the targets), inspect.go and elf.go (what cuobjdump and the cubin
// headers say), rebuild.go and repro.go (the second build and the
// comparison).
//
// [Fingerprint] records the toolchain a build used: nvcc's path, version and
// digest and the host compiler's version.
package cuda
