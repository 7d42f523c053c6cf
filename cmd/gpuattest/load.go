package main

import (
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/spf13/cobra"
)

// loadPipeline loads a pipeline the one way lint, run and lock all do:
// pipeline.Load with its every rule (the cuda-build rules included), and
// root as --root: the directory the pipeline's workdir may reach up to,
// when not the default (the enclosing git work tree, else the file's
// directory).
func loadPipeline(path, root string) (*pipeline.Pipeline, error) {
	var opts []pipeline.LoadOption
	if root != "" {
		opts = append(opts, pipeline.WithRoot(root))
	}
	return pipeline.Load(path, opts...)
}

// rootFlag adds --root to c and returns where its value lands.
func rootFlag(c *cobra.Command) *string {
	var r string
	c.Flags().StringVar(&r, "root", "", "directory the pipeline's workdir may reach up to (default: the enclosing git work tree, else the pipeline file's directory)")
	return &r
}
