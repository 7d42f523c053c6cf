package codecheck_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestNoReplace fails when go.mod has a replace directive (issue 22 item
// 3): the go command refuses `go install module/cmd/gpuattest@version`
// for a module with one, and library users never get the replaced code.
// A dependency that is slow or wrong gets its fix upstream, or is no
// longer needed; it is not forked.
func TestNoReplace(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "go.mod")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Module == nil || f.Module.Mod.Path != "github.com/gpuattest/gpuattest" {
		t.Fatalf("%s: not the gpuattest module's go.mod", path)
	}
	for _, r := range f.Replace {
		t.Errorf("%s:%d: replace %s => %s\nhint: no forks and no replace lines: send the fix upstream, or stop needing the module", path, r.Syntax.Start.Line, r.Old.Path, r.New.Path)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "third_party")); err == nil {
		t.Errorf("third_party/ exists\nhint: no forked dependencies; use the upstream module")
	}
}
