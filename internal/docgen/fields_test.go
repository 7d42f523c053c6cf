package docgen

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated pages in docs/")

const (
	pipelineSchema = "../../schemas/pipeline.schema.json"
	fieldsPage     = "../../docs/pipeline-fields.md"
)

// TestPipelineFields fails when docs/pipeline-fields.md is not what
// schemas/pipeline.schema.json generates; -update rewrites it.
func TestPipelineFields(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(pipelineSchema)
	if err != nil {
		t.Fatal(err)
	}
	want, err := fieldsDoc(b)
	if err != nil {
		t.Fatalf("%s: %v", pipelineSchema, err)
	}
	if *update {
		if err := os.WriteFile(fieldsPage, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(fieldsPage)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is stale (%v)\nhint: run go generate ./internal/docgen (after go generate ./schemas for the schema)", filepath.Base(fieldsPage), err)
	}
}

// TestPipelineFieldsCoverSchema: every property of every object in the
// schema has its row, and a type the page names links to its section.
func TestPipelineFieldsCoverSchema(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(pipelineSchema)
	if err != nil {
		t.Fatal(err)
	}
	page, err := fieldsDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	var root schema
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	rows := 0
	check := func(where string, s *schema) {
		for name := range s.Properties {
			rows++
			if !bytes.Contains(page, []byte("| `"+name+"` |")) {
				t.Errorf("%s.%s has no row", where, name)
			}
		}
	}
	check("pipeline", &root)
	for name, d := range root.Defs {
		check(name, d)
		if !bytes.Contains(page, []byte("\n## "+name+"\n")) {
			t.Errorf("no section for %s", name)
		}
	}
	if rows < 40 {
		t.Errorf("%d field rows, want the pipeline's and its steps' (over 40)", rows)
	}
}

// schema is the part of a JSON Schema (draft 2020-12) the page renders.
type schema struct {
	Title                string             `json:"title"`
	Description          string             `json:"description"`
	Type                 string             `json:"type"`
	Ref                  string             `json:"$ref"`
	Enum                 []any              `json:"enum"`
	Pattern              string             `json:"pattern"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	OneOf                []*schema          `json:"oneOf"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Defs                 map[string]*schema `json:"$defs"`
	// order is the properties' order in the file.
	order []string
}

// UnmarshalJSON decodes s and keeps the order of its properties.
func (s *schema) UnmarshalJSON(b []byte) error {
	type plain schema
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	var raw struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.Properties) == 0 {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Properties))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		s.order = append(s.order, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// fieldsDoc renders the pipeline schema as a Markdown page: the top-level
// fields, then a section per definition.
func fieldsDoc(b []byte) ([]byte, error) {
	var root schema
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	if len(root.Properties) == 0 {
		return nil, fmt.Errorf("no properties: not the pipeline schema")
	}
	var w bytes.Buffer
	w.WriteString("<!-- Generated from schemas/pipeline.schema.json by go generate ./internal/docgen; do not edit. -->\n\n")
	w.WriteString("# Pipeline fields\n\n")
	fmt.Fprintf(&w, "%s Every field of a pipeline file, as `gpuattest lint` and the JSON Schema\n", root.Description)
	w.WriteString("(`schemas/pipeline.schema.json`, which editors use) check them; [pipeline.md](pipeline.md)\nexplains how they work together. A field marked required must be present.\n\n")
	w.WriteString("## Pipeline\n\n")
	table(&w, &root)
	names := make([]string, 0, len(root.Defs))
	for name := range root.Defs {
		names = append(names, name)
	}
	// Objects first (Step, the largest, leads), then value types.
	slices.SortFunc(names, func(a, b string) int {
		oa, ob := root.Defs[a].Type == "object", root.Defs[b].Type == "object"
		switch {
		case oa != ob && oa:
			return -1
		case oa != ob:
			return 1
		case a == "Step":
			return -1
		case b == "Step":
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		d := root.Defs[name]
		fmt.Fprintf(&w, "## %s\n\n", name)
		if d.Description != "" {
			fmt.Fprintf(&w, "%s.\n\n", strings.TrimSuffix(capitalize(d.Description), "."))
		}
		if d.Type == "object" {
			table(&w, d)
			continue
		}
		fmt.Fprintf(&w, "Written as %s.\n\n", typeOf(d))
	}
	return bytes.TrimRight(w.Bytes(), "\n"), nil
}

// table writes the field table of object s.
func table(w *bytes.Buffer, s *schema) {
	w.WriteString("| field | type | meaning |\n|---|---|---|\n")
	for _, name := range s.order {
		p := s.Properties[name]
		desc := cell(p.Description)
		if slices.Contains(s.Required, name) {
			desc = strings.TrimSuffix("required; "+desc, "; ")
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", name, cell(typeOf(p)), desc)
	}
	w.WriteString("\n")
}

// typeOf describes s's type in words, linking a definition to its section.
func typeOf(s *schema) string {
	switch {
	case s.Ref != "":
		name := strings.TrimPrefix(s.Ref, "#/$defs/")
		return fmt.Sprintf("[%s](#%s)", name, strings.ToLower(name))
	case len(s.OneOf) > 0:
		var alts []string
		for _, o := range s.OneOf {
			alts = append(alts, typeOf(o))
		}
		return strings.Join(alts, ", or ")
	case len(s.Enum) > 0:
		var vals []string
		for _, v := range s.Enum {
			vals = append(vals, fmt.Sprintf("`%v`", v))
		}
		return "one of " + strings.Join(vals, ", ")
	case s.Type == "array" && s.Items != nil:
		return "list of " + typeOf(s.Items)
	case s.Type == "object" && len(s.AdditionalProperties) > 0 && s.AdditionalProperties[0] == '{':
		var v schema
		if json.Unmarshal(s.AdditionalProperties, &v) == nil {
			return "map of name to " + typeOf(&v)
		}
	case s.Pattern != "":
		return fmt.Sprintf("%s matching `%s`", s.Type, s.Pattern)
	}
	if s.Type == "" {
		return "any"
	}
	return s.Type
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
