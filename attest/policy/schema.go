package policy

import (
	"bytes"
	"encoding/json"

	"github.com/invopop/jsonschema"
)

// SchemaID is the $id of the policy's JSON Schema.
const SchemaID = "https://gpuattest.dev/schemas/policy.schema.json"

// Schema returns the JSON Schema of a policy file, as checked in at
// schemas/policy.schema.json (regenerate with go generate ./attest).
func Schema() ([]byte, error) {
	r := &jsonschema.Reflector{Anonymous: true}
	s := r.Reflect(&Policy{})
	s.ID = SchemaID
	s.Title = "gpuattest verification policy"
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
