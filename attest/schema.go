package attest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:generate go run ./internal/schemagen -out ../schemas

// PredicateSchemaID is the $id of the predicate's JSON Schema.
const PredicateSchemaID = "https://gpuattest.dev/schemas/predicate.schema.json"

// PredicateSchema returns the JSON Schema of ValidationPredicate, as
// checked in at schemas/predicate.schema.json.
func PredicateSchema() ([]byte, error) {
	r := &invopop.Reflector{
		Anonymous:                  true,
		RequiredFromJSONSchemaTags: false,
		DoNotReference:             false,
	}
	s := r.Reflect(&ValidationPredicate{})
	s.ID = PredicateSchemaID
	s.Title = "gpuattest GPU validation predicate (" + ValidationPredicateType + ")"
	return marshalSchema(s)
}

func marshalSchema(s *invopop.Schema) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var predicateValidator = sync.OnceValues(func() (*jsonschema.Schema, error) {
	b, err := PredicateSchema()
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(PredicateSchemaID, doc); err != nil {
		return nil, err
	}
	return c.Compile(PredicateSchemaID)
})

// CheckPredicate validates a predicate of type ValidationPredicateType
// against its JSON Schema; predicates of other types are not checked.
func CheckPredicate(predicateType string, predicate json.RawMessage) error {
	if predicateType != ValidationPredicateType {
		return nil
	}
	sch, err := predicateValidator()
	if err != nil {
		return fmt.Errorf("compiling predicate schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(predicate))
	if err != nil {
		return fmt.Errorf("predicate: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("predicate does not match %s: %w", PredicateSchemaID, err)
	}
	return nil
}
