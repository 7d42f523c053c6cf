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
// running a pipeline is composed in pipeline/run. This test keeps it so:
// cmd may import only the packages below from this module (the engine,
// runners, step contract, run-directory reader and claim collection are
// the library's business).
var cmdMayImport = []string{
	"attest",
	"attest/policy",
	"attest/sign",
	"attest/oci",
	"attest/verify",
	"attest/dispatch",
	"pipeline",
	"pipeline/cuda",    // inspect
	"pipeline/gpu",     // device
	"attest/hardware",  // device
	"pipeline/image",   // lock
	"pipeline/rebuild", // rebuild
	"pipeline/report",  // report
	"pipeline/run",     // run
	"pipeline/suite",   // compare, baseline save
	"pipeline/stats",
	// run --fleet; fleet collect, verify and node
	"pipeline/fleet",
	"pipeline/fleet/dispatch",
	"pipeline/fleet/slurm",
	"pipeline/fleet/kube",
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
