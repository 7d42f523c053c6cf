package verify_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function in non-test code may be.
const maxFuncLines = 100

// TestFunctionLength keeps the verification code's functions short: the
// packages on the verify path and the CLI verbs that render them.
func TestFunctionLength(t *testing.T) {
	t.Parallel()
	var files []string
	for _, dir := range []string{".", "../policy"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	files = append(files, "../../cmd/gpuattest/verify.go", "../../cmd/gpuattest/sign.go", "../../cmd/gpuattest/compare.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				return true
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines long, more than %d", fset.Position(fn.Pos()), fn.Name.Name, lines, maxFuncLines)
			}
			return true
		})
	}
}
