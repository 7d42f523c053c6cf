package image

import (
	"github.com/gpuattest/gpuattest/internal/schema"

	"github.com/invopop/jsonschema"
)

// LockSchemaID is the $id of the lock file's JSON Schema.
const LockSchemaID = "https://gpuattest.dev/schemas/lock.schema.json"

// LockSchemaJSON returns the JSON Schema of gpuattest.lock, generated from
// the Go types, as checked in at schemas/lock.schema.json.
func LockSchemaJSON() ([]byte, error) {
	r := &jsonschema.Reflector{ExpandedStruct: true}
	s := r.Reflect(&Lock{})
	s.ID = LockSchemaID
	s.Title = "gpuattest lock"
	s.Description = "gpuattest.lock: every image of a pipeline, by name, resolved to digests (apiVersion " + LockAPIVersion + ")."
	return schema.Marshal(s)
}
