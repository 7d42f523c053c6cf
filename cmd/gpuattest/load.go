package main

import (
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
)

// loadPipeline loads a pipeline with the step checks of every kind this
// binary implements, so lint and run report them with positions.
func loadPipeline(path string) (*pipeline.Pipeline, error) {
	return pipeline.Load(path, pipeline.WithStepCheck(pipeline.KindCUDABuild, cudaCheck))
}

func cudaCheck(p *pipeline.Pipeline, i int) []pipeline.Issue {
	var out []pipeline.Issue
	for _, is := range cuda.CheckStep(p, i) {
		out = append(out, pipeline.Issue{Path: is.Path, Message: is.Message, Hint: is.Hint})
	}
	return out
}
