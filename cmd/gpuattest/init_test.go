package main

import (
	"testing"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// metaschemasAtInit is how many JSON Schema drafts had their metaschemas
// compiled once every package gpuattest links was initialised: a package
// variable of package main is set after all its dependencies' init.
var metaschemasAtInit = sjs.MetaschemaCompiles()

// TestNoSchemaCompiledAtInit keeps schema compilation out of start-up
// (issue 13 item 15): upstream santhosh-tekuri/jsonschema compiles the
// metaschemas of five drafts in its init, on every gpuattest start, so
// go.mod replaces it with third_party/jsonschema, which compiles a draft's
// metaschemas when a schema of that draft is first compiled; gpuattest's
// own schemas are compiled in sync.OnceValues on first use.
func TestNoSchemaCompiledAtInit(t *testing.T) {
	if metaschemasAtInit != 0 {
		t.Errorf("%d JSON Schema drafts compiled during package init, want 0\nhint: compile schemas on first use (sync.OnceValues), and keep go.mod's replace of santhosh-tekuri/jsonschema/v6 by third_party/jsonschema", metaschemasAtInit)
	}
}
