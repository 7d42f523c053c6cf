package fleet_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const schemaFile = "../../schemas/fleet.schema.json"

// TestSchemaAcceptsTheExample validates testdata/fleet.yaml against the
// checked-in schema, and refuses a class with a count-only gres.
func TestSchemaAcceptsTheExample(t *testing.T) {
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("https://gpuattest.dev/schemas/fleet.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://gpuattest.dev/schemas/fleet.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(yamlValue(t, data)); err != nil {
		t.Errorf("testdata/fleet.yaml: %v", err)
	}
	bad := bytes.Replace(data, []byte("gres: gpu:h100:8"), []byte("gres: gpu:8"), 1)
	if err := s.Validate(yamlValue(t, bad)); err == nil {
		t.Errorf("the schema accepts gres: gpu:8")
	}
}

func yamlValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
