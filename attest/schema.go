package attest

import (
	"bytes"
	"encoding/json"

	"github.com/invopop/jsonschema"
)

//go:generate go run ./internal/schemagen -out ../schemas

// PredicateSchemaID is the $id of the predicate's JSON Schema.
const PredicateSchemaID = "https://gpuattest.dev/schemas/predicate.schema.json"

// PredicateSchema returns the JSON Schema of ValidationPredicate, as
// checked in at schemas/predicate.schema.json.
func PredicateSchema() ([]byte, error) {
	r := &jsonschema.Reflector{
		Anonymous:                  true,
		RequiredFromJSONSchemaTags: false,
		DoNotReference:             false,
	}
	s := r.Reflect(&ValidationPredicate{})
	s.ID = PredicateSchemaID
	s.Title = "gpuattest GPU validation predicate (" + ValidationPredicateType + ")"
	return marshalSchema(s)
}

func marshalSchema(s *jsonschema.Schema) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
