// Package schema holds what every generated JSON Schema of gpuattest shares:
// rendering a reflected schema to the checked-in bytes, compiling schema
// bytes for validation, and the main of the genschema commands that
// `go generate` runs.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// Marshal renders s as indented JSON with a final newline: the bytes that
// are checked in under schemas/.
func Marshal(s *jsonschema.Schema) ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Compile compiles schema bytes, registered under name, for validation.
func Compile(name string, b []byte) (*sjs.Schema, error) {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := sjs.NewCompiler()
	if err := c.AddResource(name, doc); err != nil {
		return nil, err
	}
	return c.Compile(name)
}

// GenerateMain is the body of a genschema command: it writes what gen
// returns to the file named by the only argument, atomically, and exits.
func GenerateMain(gen func() ([]byte, error)) {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genschema OUT.json")
		os.Exit(2)
	}
	b, err := gen()
	if err == nil {
		err = atomicfile.Write(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
}
