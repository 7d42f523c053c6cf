package fleet

import (
	"github.com/gpuattest/gpuattest/internal/schema"
	"github.com/gpuattest/gpuattest/pipeline"

	"github.com/invopop/jsonschema"
)

// SchemaID is the $id of the fleet file JSON Schema.
const SchemaID = "https://gpuattest.dev/schemas/fleet.schema.json"

// SchemaJSON returns the JSON Schema of a fleet file, generated from the
// Go types (YAML field names), as checked in at schemas/fleet.schema.json.
func SchemaJSON() ([]byte, error) {
	r := &jsonschema.Reflector{FieldNameTag: "yaml", ExpandedStruct: true}
	s := r.Reflect(&Spec{})
	s.ID = SchemaID
	s.Title = "gpuattest fleet"
	s.Description = "Where a pipeline's GPU steps run: the engine, the shared directory and one entry per node class (apiVersion " + pipeline.APIVersion + ")."
	return schema.Marshal(s)
}

// JSONSchemaExtend pins each class's targets to the known architectures.
func (Class) JSONSchemaExtend(s *jsonschema.Schema) {
	if t, ok := s.Properties.Get("targets"); ok {
		enum := make([]any, len(pipeline.Architectures))
		for i, a := range pipeline.Architectures {
			enum[i] = a
		}
		t.Items = &jsonschema.Schema{Type: "string", Enum: enum}
		t.UniqueItems = true
	}
	if g, ok := s.Properties.Get("gres"); ok {
		g.Pattern = gresRE.String()
	}
}
