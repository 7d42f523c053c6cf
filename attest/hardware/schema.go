package hardware

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gpuattest/gpuattest/internal/schema"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// RecordSchema returns the JSON Schema of the hardware record, as checked
// in at schemas/hardware.schema.json.
func RecordSchema() *jsonschema.Schema {
	r := &jsonschema.Reflector{}
	s := r.Reflect(&Record{})
	s.ID = "https://gpuattest.dev/schemas/hardware.schema.json"
	s.Title = "gpuattest hardware record"
	s.Description = "The host, NVIDIA driver and GPUs a run used, as NVML reports them (simulated: true when they come from GPUATTEST_FAKE_GPU). A metric a GPU does not report is absent, never zero."
	return s
}

// RecordSchemaJSON returns RecordSchema as indented JSON with a final
// newline: the bytes of schemas/hardware.schema.json.
func RecordSchemaJSON() ([]byte, error) {
	return schema.Marshal(RecordSchema())
}

var compiledSchema = sync.OnceValues(func() (*sjs.Schema, error) {
	b, err := RecordSchemaJSON()
	if err != nil {
		return nil, err
	}
	return schema.Compile("hardware.schema.json", b)
})

// Decode parses a hardware record's JSON, validates it against
// RecordSchema and checks its digest. Errors name the offending field.
func Decode(raw []byte) (*Record, error) {
	sch, err := compiledSchema()
	if err != nil {
		return nil, fmt.Errorf("compiling the hardware record schema: %w", err)
	}
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("hardware record: %w", err)
	}
	if err := sch.Validate(doc); err != nil {
		return nil, fmt.Errorf("hardware record does not match schemas/hardware.schema.json: %w", err)
	}
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("hardware record: %w", err)
	}
	if err := r.Verify(); err != nil {
		return nil, err
	}
	return &r, nil
}
