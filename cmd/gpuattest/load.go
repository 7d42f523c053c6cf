package main

import (
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/spf13/cobra"
)

// loadPipeline loads a pipeline with the step checks of every kind this
// binary implements, so lint and run report them with positions. root is
// --root: the directory the pipeline's workdir may reach up to, when not
// the default (the enclosing git work tree, else the file's directory).
func loadPipeline(path, root string) (*pipeline.Pipeline, error) {
	return pipeline.Load(path, loadOptions(root)...)
}

func loadOptions(root string) []pipeline.LoadOption {
	opts := []pipeline.LoadOption{pipeline.WithStepCheck(pipeline.KindCUDABuild, cudaCheck)}
	if root != "" {
		opts = append(opts, pipeline.WithRoot(root))
	}
	return opts
}

// rootFlag adds --root to c and returns where its value lands.
func rootFlag(c *cobra.Command) *string {
	var r string
	c.Flags().StringVar(&r, "root", "", "directory the pipeline's workdir may reach up to (default: the enclosing git work tree, else the pipeline file's directory)")
	return &r
}

func cudaCheck(p *pipeline.Pipeline, i int) []pipeline.Issue {
	var out []pipeline.Issue
	for _, is := range cuda.CheckStep(p, i) {
		out = append(out, pipeline.Issue{Path: is.Path, Message: is.Message, Hint: is.Hint})
	}
	return out
}
