package schema

import (
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
)

type sample struct {
	Name string `json:"name"`
	N    int    `json:"n,omitempty"`
}

func TestMarshalAndCompile(t *testing.T) {
	b, err := Marshal((&jsonschema.Reflector{}).Reflect(&sample{}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), "}\n") {
		t.Errorf("no final newline: %q", b[len(b)-5:])
	}
	s, err := Compile("sample.schema.json", b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"name": "x"}); err != nil {
		t.Errorf("valid document refused: %v", err)
	}
	if err := s.Validate(map[string]any{"n": 1}); err == nil {
		t.Error("document without the required name accepted")
	}
	if _, err := Compile("bad.json", []byte("{")); err == nil {
		t.Error("broken schema compiled")
	}
}
