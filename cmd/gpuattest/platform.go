package main

import (
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/spf13/cobra"
)

// platformOptions wires the executors, runners, image resolution and
// hardware record this binary provides into the engine.
func platformOptions(c *cobra.Command, p *pipeline.Pipeline, f *runFlags) ([]engine.Option, error) {
	return nil, nil
}
