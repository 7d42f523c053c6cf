package codecheck_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpuattest/gpuattest"

// topOrder is the one direction imports between top-level folders go:
// a folder may import only the folders after it.
var topOrder = []string{"cmd", "bench", "schemas", "pipeline", "attest", "internal"}

// pipelineFloors puts every package under pipeline/ on a floor: a
// package imports only packages of lower floors. Leaves (statistics, the
// git source, images) at 0; the spec and runners; the step contract and
// GPU platform; the step kinds and the engine; the run directory; the
// statements and reports made from it; the fleet's coordinator; the
// facade run; rebuild and the fleet's node side (both run a pipeline) on
// top. The types packages (pipeline/runtypes) sit below them all. The
// fleet's spec sits beside the GPU platform, its engines beside the step
// kinds.
var pipelineFloors = map[string]int{
	"pipeline/stats":                  0,
	"pipeline/runlayout":              0,  // the run directory's file names, for its writers and readers
	"pipeline/runtypes":               -1, // the data types a front end renders (TestTypesPackages), below every floor
	"pipeline/source":                 0,
	"pipeline/image":                  0,
	"pipeline/floors":                 0, // per-model floors: a table and its lookups
	"pipeline/coverage":               0, // coverage reports (lcov, Cobertura, Go) read into totals
	"pipeline":                        1,
	"pipeline/runner":                 1,
	"pipeline/step":                   2,
	"pipeline/gpu":                    2,
	"pipeline/fleet":                  2,
	"pipeline/history":                2,
	"pipeline/cuda":                   3,
	"pipeline/suite":                  3,
	"pipeline/engine":                 3,
	"pipeline/fleet/slurm":            3,
	"pipeline/fleet/kube":             3,
	"pipeline/fleet/fleettest":        8, // the engines' conformance suite (through run.Fleet), for the engines' tests
	"pipeline/fleet/engines":          4, // registers slurm and kube
	"pipeline/rundir":                 4,
	"pipeline/collect":                5,
	"pipeline/report":                 5,
	"pipeline/fleet/internal/stagefs": 0, // the dispatch directory's names and trust checks, for both sides
	"pipeline/fleet/coordinate":       6, // the fleet's coordinator: stage, submit, wait, collect (run.Fleet drives it)
	"pipeline/run":                    7,
	"pipeline/rebuild":                8,
	"pipeline/fleet/node":             8, // the node side of a job: runs the GPU part through run
}

// leaves are public packages that import nothing of this module, so any
// folder, internal/ included, may import them: the problem type that
// every reader reports in, which a program linking attest/ must be able
// to name.
var leaves = []string{"attest/problem"}

// testHelpers are internal packages that only tests import; they may
// build fixtures from the library.
var testHelpers = []string{"internal/reportfixture", "internal/runfixture"}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "-deps=false", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []listed
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func top(rel string) string {
	first, _, _ := strings.Cut(rel, "/")
	return first
}

// TestLayers holds the folders to the design's layers: imports between
// top-level folders go one way (cmd -> pipeline -> attest -> internal,
// and every folder may import the leaves, which import nothing of ours),
// so a verifier linking attest/ links nothing of pipeline/, and inside
// pipeline/ each package imports only packages of lower floors.
func TestLayers(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t) {
		from := p.ImportPath
		for _, im := range p.Imports {
			rel, ours := strings.CutPrefix(im, module+"/")
			if !ours {
				continue
			}
			if slices.Contains(leaves, from) {
				t.Errorf("%s imports %s: a leaf imports nothing of this module", from, rel)
			}
			if !slices.Contains(testHelpers, from) && !slices.Contains(leaves, rel) && !strings.Contains(from, "/internal/") && top(rel) != top(from) {
				fi, ti := slices.Index(topOrder, top(from)), slices.Index(topOrder, top(rel))
				if fi < 0 || ti < 0 || ti < fi {
					t.Errorf("%s imports %s: imports between top-level folders go %s", from, rel, strings.Join(topOrder, " -> "))
				}
			}
			if top(from) == "pipeline" && top(rel) == "pipeline" && !strings.Contains(from, "/internal/") {
				ff, okf := pipelineFloors[from]
				tf, okt := pipelineFloors[rel]
				switch {
				case !okf:
					t.Errorf("%s has no floor: add it to pipelineFloors (internal/codecheck/layers_test.go)", from)
				case !okt:
					t.Errorf("%s imports %s, which has no floor", from, rel)
				case tf >= ff:
					t.Errorf("%s (floor %d) imports %s (floor %d): a package imports only lower floors", from, ff, rel, tf)
				}
			}
		}
	}
}

// ioPackages are the standard library packages that reach outside the
// process; a types package imports none of them.
var ioPackages = []string{"os", "os/exec", "io/fs", "net", "net/http", "syscall", "path/filepath"}

// TestTypesPackages: a types package of pipeline/ (its name ends in
// "types", like pipeline/runtypes) holds data types only, as ggcr's
// pkg/v1 does: it does no I/O and imports no package of pipeline/ but
// other types packages, so every floor may name its types.
func TestTypesPackages(t *testing.T) {
	t.Parallel()
	found := 0
	for _, p := range listPackages(t) {
		if top(p.ImportPath) != "pipeline" || !strings.HasSuffix(p.ImportPath, "types") {
			continue
		}
		found++
		for _, im := range p.Imports {
			rel, ours := strings.CutPrefix(im, module+"/")
			if slices.Contains(ioPackages, im) || ours && top(rel) == "pipeline" && !strings.HasSuffix(rel, "types") {
				t.Errorf("%s imports %s: a types package holds data types only (no I/O, no sibling but other types packages)", p.ImportPath, im)
			}
		}
	}
	if found == 0 {
		t.Error("no types package found under pipeline/")
	}
}

// TestVerifierLinksNoPipeline: go list -deps of attest/... names no
// pipeline package, so a third party's verifier links no NVML, cgo,
// runners or charts.
func TestVerifierLinksNoPipeline(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "./attest/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, line := range strings.Fields(string(out)) {
		if strings.HasPrefix(line, module+"/pipeline") || strings.HasPrefix(line, module+"/cmd") || strings.Contains(line, "go-nvml") {
			t.Errorf("attest/... depends on %s", line)
		}
	}
}

// TestSpecImportsNoSibling: the spec package (pipeline) imports no other
// package of pipeline/, neither a step kind nor stats: it is the types,
// their validation and defaults, read by everything above it.
func TestSpecImportsNoSibling(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t) {
		if p.ImportPath != "pipeline" {
			continue
		}
		for _, im := range p.Imports {
			if strings.HasPrefix(im, module+"/pipeline/") {
				t.Errorf("the spec package imports %s", im)
			}
		}
	}
}

// TestNoSchemaEngineLinked: the binary runs no JSON Schema engine and
// links no schema reflector; the schemas are generated by package
// schemas (go generate ./schemas) and checked in tests only.
func TestNoSchemaEngineLinked(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "./cmd/gpuattest")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, line := range strings.Fields(string(out)) {
		if strings.Contains(line, "santhosh-tekuri/jsonschema") || strings.Contains(line, "invopop/jsonschema") {
			t.Errorf("cmd/gpuattest links %s\nhint: generate schemas in package schemas and read documents with jsonstrict.Read", line)
		}
	}
}
