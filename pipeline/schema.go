package pipeline

import (
	"github.com/gpuattest/gpuattest/internal/schema"

	"github.com/invopop/jsonschema"
)

// SchemaID is the $id of the pipeline JSON Schema.
const SchemaID = "https://gpuattest.dev/schemas/pipeline.schema.json"

// SchemaJSON returns the JSON Schema of a pipeline file, generated from the
// Go types (YAML field names), as checked in at schemas/pipeline.schema.json.
func SchemaJSON() ([]byte, error) {
	r := &jsonschema.Reflector{
		FieldNameTag:   "yaml",
		DoNotReference: false,
		ExpandedStruct: true,
	}
	s := r.Reflect(&Pipeline{})
	s.ID = SchemaID
	s.Title = "gpuattest pipeline"
	s.Description = "A gpuattest pipeline: pinned CUDA targets, images and a DAG of steps (apiVersion " + APIVersion + ")."
	return schema.Marshal(s)
}

// JSONSchemaExtend pins the targets' items to the known architectures.
func (Pipeline) JSONSchemaExtend(s *jsonschema.Schema) {
	if t, ok := s.Properties.Get("targets"); ok {
		enum := make([]any, len(Architectures))
		for i, a := range Architectures {
			enum[i] = a
		}
		t.Items = &jsonschema.Schema{Type: "string", Enum: enum}
		t.UniqueItems = true
	}
	if st, ok := s.Properties.Get("images"); ok {
		st.AdditionalProperties = &jsonschema.Schema{Type: "string", MinLength: ptr(uint64(1))}
	}
}
