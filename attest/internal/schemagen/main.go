// Command schemagen writes the predicate and policy JSON Schemas
// (predicate.schema.json, policy.schema.json) into the directory -out.
// It runs from go generate in package attest.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/policy"
)

func main() {
	out := flag.String("out", "schemas", "directory to write the schemas into")
	flag.Parse()
	for name, gen := range map[string]func() ([]byte, error){
		"predicate.schema.json": attest.PredicateSchema,
		"policy.schema.json":    policy.Schema,
	} {
		b, err := gen()
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, name), b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "schemagen: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
