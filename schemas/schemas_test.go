package schemas

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
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
