package codecheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCmdKnowsNoEngine: the CLI reaches the fleet's engines only through
// their registry (pipeline/fleet/engines registers them): it imports no
// engine's package and reads none of a scheduler's own variables
// (SLURM_*), which the engine's factory reads for it (NodeIdentity).
func TestCmdKnowsNoEngine(t *testing.T) {
	files, err := filepath.Glob("../../cmd/gpuattest/*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, engine := range []string{"pipeline/fleet/slurm", "pipeline/fleet/kube"} {
				if p == module+"/"+engine {
					t.Errorf("%s imports %s: build schedulers with fleet.Open, read a node's identity with fleet.NodeIdentity", path, engine)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if v, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(v, "SLURM_") {
				t.Errorf("%s names %q: the Slurm engine reads its own variables (slurm.Factory.NodeIdentity)", path, v)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no cmd/gpuattest source file found")
	}
}
