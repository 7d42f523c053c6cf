// Package pipeline holds the pipeline spec (apiVersion gpuattest.dev/v1,
// kind Pipeline): its Go types, strict YAML decoding, defaults and
// validation. Load reports every problem of a file in one pass, each with
// file:line:col, the offending line with a caret, and a hint.
//
// Load also checks the sandbox rule: every path a step names stays inside
// the pipeline's root (its workdir), and the root does not climb above
// the enclosing git work tree (WithRoot names another ceiling). The
// engine enforces the same rule again, on resolved paths, as steps run.
//
// The spec's values that name CUDA architectures parse into [Target] with
// [ParseTarget] and [ParseTargets], the one parser every package uses. The
// cuda-build rules (targets pinned, no flag that selects architectures or
// outputs, no debug information in a release pipeline) are
// [CheckCUDABuild]: Load reports them with positions, and the cuda-build
// executor refuses a step that breaks one.
//
// Sub-packages do the work: engine runs a pipeline, runner runs processes
// (host, docker, bwrap), step is the executor contract, and cuda, gpu,
// image and suite implement the step kinds and what they need.
package pipeline
