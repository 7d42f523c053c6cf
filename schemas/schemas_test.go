package schemas

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/pipeline/suite"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite the checked-in schemas")

// TestSchemasUpToDate fails when a checked-in schema differs from what
// the generator makes of the Go types now; -update rewrites them.
func TestSchemasUpToDate(t *testing.T) {
	for name, gen := range Generators {
		t.Run(name, func(t *testing.T) {
			want, err := gen()
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := atomicfile.Write(name, want, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			got, err := os.ReadFile(name)
			if err != nil {
				t.Fatalf("%v\nhint: run go generate ./schemas", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("schemas/%s is stale\nhint: run go generate ./schemas", name)
			}
		})
	}
}

// TestDescriptionsWhole: a description holding a comma is published
// whole (a struct tag's comma once cut "image name to reference (registry
// ref, oci-layout:..." after "registry ref").
func TestDescriptionsWhole(t *testing.T) {
	b, err := Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	want := "image name to reference (registry ref, oci-layout:PATH[@digest] or docker-archive:PATH)"
	if got := s.Properties["images"].Description; got != want {
		t.Errorf("images description = %q, want %q", got, want)
	}
	for name, p := range s.Properties {
		if strings.Count(p.Description, "(") != strings.Count(p.Description, ")") {
			t.Errorf("%s: description %q looks cut", name, p.Description)
		}
	}
}

// TestGoldenDocuments: documents gpuattest's readers accept match the
// published schemas (a JSON Schema validator runs here, in a test, never
// in the binary), and a document they refuse for a bad value is refused
// by the schema too.
func TestGoldenDocuments(t *testing.T) {
	for _, tt := range []struct {
		schema string
		files  []string
		read   func([]byte) error
	}{
		{"results.schema.json", []string{"../pipeline/suite/testdata/good.json"}, func(b []byte) error {
			_, err := suite.ReadResultsFormat(writeTemp(t, "r.json", b), suite.FormatGpuattest)
			return err
		}},
		{"hardware.schema.json", []string{
			"../pipeline/collect/testdata/runs/ci/run/hardware.json",
			"../pipeline/collect/testdata/runs/simulated-h100/run/hardware.json",
			"../pipeline/collect/testdata/runs/quickstart/run/hardware.json",
		}, func(b []byte) error { _, err := hardware.Decode(b); return err }},
	} {
		sch := compile(t, tt.schema)
		for _, f := range tt.files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.read(b); err != nil {
				t.Errorf("%s: the reader refuses it: %v", f, err)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(doc); err != nil {
				t.Errorf("%s does not match schemas/%s: %v", f, tt.schema, err)
			}
		}
	}
	// A bad status: the reader and the schema both refuse it.
	bad := []byte(`{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"ok"}]}`)
	if _, err := suite.ReadResultsFormat(writeTemp(t, "bad.json", bad), suite.FormatGpuattest); err == nil {
		t.Error("the results reader accepted status ok")
	}
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(bad))
	if compile(t, "results.schema.json").Validate(doc) == nil {
		t.Error("the results schema accepted status ok")
	}
}

func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.NewCompiler().Compile(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
