// Command genschema writes the pipeline JSON Schema generated from the Go
// types to the file named by its argument (go generate runs it).
package main

import (
	"fmt"
	"os"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/pipeline"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genschema OUT.json")
		os.Exit(2)
	}
	b, err := pipeline.SchemaJSON()
	if err == nil {
		err = atomicfile.Write(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
}
