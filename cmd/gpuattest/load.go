package main

import (
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/spf13/cobra"
)

// loadPipeline loads a pipeline as lint, lock and run all do
// (pipeline.Load); root is --root: the directory the pipeline's workdir
// may reach up to, when not the default (the enclosing git work tree,
// else the file's directory).
func loadPipeline(path, root string) (*pipeline.Pipeline, error) {
	if root == "" {
		return pipeline.Load(path)
	}
	return pipeline.Load(path, pipeline.WithRoot(root))
}

// rootFlag adds --root to c and returns where its value lands.
func rootFlag(c *cobra.Command) *string {
	var r string
	c.Flags().StringVar(&r, "root", "", "directory the pipeline's workdir may reach up to (default: the enclosing git work tree, else the pipeline file's directory)")
	return &r
}
