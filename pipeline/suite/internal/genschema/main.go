// Command genschema writes the results JSON Schema generated from
// suite.Results to the file named by its argument (go generate runs it).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/pipeline/suite"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genschema OUT.json")
		os.Exit(2)
	}
	b, err := suite.ResultsSchemaJSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
	out := os.Args[1]
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, out); err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
}
