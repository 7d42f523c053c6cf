// Command genschema writes the fleet file's JSON Schema, generated from
// the Go types, to the file named by its argument (go generate runs it).
package main

import (
	"github.com/gpuattest/gpuattest/internal/schema"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

func main() { schema.GenerateMain(fleet.SchemaJSON) }
