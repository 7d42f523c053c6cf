// Package pipeline holds the pipeline spec (apiVersion gpuattest.dev/v1,
// kind Pipeline): its Go types, strict YAML decoding, defaults and
// validation. Load reports every problem of a file in one pass, each with
// file:line:col, the offending line with a caret, and a hint.
//
// Sub-packages do the work: engine runs a pipeline, runner runs processes
// (host, docker, bwrap), step is the executor contract, and cuda, gpu,
// image and suite implement the step kinds and what they need.
package pipeline

//go:generate go run ./internal/genschema ../schemas/pipeline.schema.json
