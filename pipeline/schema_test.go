package pipeline

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const schemaFile = "../schemas/pipeline.schema.json"

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
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
	if err := c.AddResource("https://gpuattest.dev/schemas/pipeline.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://gpuattest.dev/schemas/pipeline.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlToJSONValue converts a YAML file into the value the schema validator
// reads.
func yamlToJSONValue(t *testing.T, data []byte) any {
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

// TestExamplePipelines validates every file in pipelines/ against the
// schema and with Load, and checks each points editors at the schema.
func TestExamplePipelines(t *testing.T) {
	s := compileSchema(t)
	files, err := filepath.Glob("../pipelines/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no pipelines in ../pipelines")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte("# yaml-language-server: $schema=../schemas/pipeline.schema.json\n")) {
				t.Errorf("%s: first line must be # yaml-language-server: $schema=../schemas/pipeline.schema.json", f)
			}
			if err := s.Validate(yamlToJSONValue(t, data)); err != nil {
				t.Errorf("%s does not match the schema: %v", f, err)
			}
			if _, err := Load(f); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		})
	}
}

// TestSchemaRejectsWhatLoadRejects spot-checks that schema and loader agree
// on structural mistakes.
func TestSchemaRejectsWhatLoadRejects(t *testing.T) {
	s := compileSchema(t)
	tests := []struct {
		name string
		yaml string
	}{
		{"unknown field", "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: x\nsteps: [{id: a, run: 'true', bogus: 1}]\n"},
		{"unknown target", "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: x\ntargets: [sm_95]\nsteps: [{id: a, run: 'true'}]\n"},
		{"missing id", "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: x\nsteps: [{run: 'true'}]\n"},
		{"bad duration", "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: x\nsteps: [{id: a, run: 'true', timeout: ten}]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Validate(yamlToJSONValue(t, []byte(tt.yaml))); err == nil {
				t.Error("schema accepted it")
			}
			if _, err := Parse("x.yaml", []byte(tt.yaml)); err == nil {
				t.Error("Parse accepted it")
			}
		})
	}
}
