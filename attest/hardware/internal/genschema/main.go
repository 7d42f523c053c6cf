// Command genschema writes a JSON Schema generated from the Go types to the
// file named by its argument (go generate runs it).
package main

import (
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/schema"
)

func main() { schema.GenerateMain(hardware.RecordSchemaJSON) }
