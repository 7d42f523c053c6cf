package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The CLI parses flags, makes library calls and renders their results;
// running a pipeline, and the pipeline side of the other verbs (device,
// inspect, lock, compare, baseline save), is composed in the facade,
// pipeline/run. This test keeps it so: cmd may import only the packages
// below from this module: attest/ (the verifier's library), the facade
// and the facade-level verbs (rebuild, report, history, the fleet), and
// the types it renders (the spec, the hardware record, the run's states
// and events in pipeline/runtypes, the comparison's verdicts). The
// engine, runners, step kinds, platform and run-directory reader are the
// library's business.
var cmdMayImport = []string{
	"attest",
	"attest/policy",
	"attest/sign",
	"attest/oci",
	"attest/verify",
	"attest/dispatch",
	"attest/hardware",    // device renders the hardware record
	"attest/gpuevidence", // gpu-evidence verify
	"pipeline",           // the spec and its problems, rendered by lint and load
	"pipeline/run",       // the facade
	"pipeline/runtypes",  // the run's states, events and progress it renders
	"pipeline/rebuild",   // rebuild
	"pipeline/report",    // report
	"pipeline/stats",     // compare renders its verdicts
	// run --fleet; fleet collect, verify and node; the engines only
	// through their registry (internal/codecheck TestCmdKnowsNoEngine)
	"pipeline/fleet",
	"pipeline/fleet/coordinate",
	"pipeline/fleet/node",
	"pipeline/fleet/engines",
	"pipeline/history", // history
}

func TestCmdImports(t *testing.T) {
	t.Parallel()
	const module = "github.com/gpuattest/gpuattest/"
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			rel, ours := strings.CutPrefix(path, module)
			if ours && !slices.Contains(cmdMayImport, rel) && !strings.HasPrefix(rel, "internal/") {
				t.Errorf("%s imports %s: the CLI renders, the library composes (use pipeline/run or add a library call)", f, path)
			}
		}
	}
}
