package codecheck_test

import (
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPublicAPINamesNoInternal: no exported identifier of attest/ (the
// library a third party links) names an internal/ type in its
// signature, fields, methods or alias, so a caller can name every type it
// is handed, and errors.As every error type. The API is read from the
// compiler's export data with go/types.
func TestPublicAPINamesNoInternal(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", "./attest/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	var public []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if strings.HasPrefix(p.ImportPath, module+"/attest") && !isInternal(p.ImportPath) {
			public = append(public, p.ImportPath)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	for _, path := range public {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("importing %s: %v", path, err)
		}
		for _, leak := range internalNames(pkg) {
			t.Errorf("%s\nhint: export the type from a public package (as attest/problem is) or keep it out of the API", leak)
		}
	}
}

// isInternal reports whether path has an internal element: a package
// that only its own module (or subtree) may import.
func isInternal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}

// internalNames returns "pkg.Name names internal/x.T" for every internal
// type that pkg's exported API names.
func internalNames(pkg *types.Package) []string {
	var leaks []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		at := strings.TrimPrefix(pkg.Path(), module+"/") + "." + name
		w := &apiWalker{at: at, seen: map[types.Type]bool{}}
		tn, isType := obj.(*types.TypeName)
		switch {
		case isType && !tn.IsAlias():
			named := tn.Type().(*types.Named)
			w.walk(named.Underlying())
			for m := range named.Methods() {
				if m.Exported() {
					w.at = at + "." + m.Name()
					w.walk(m.Type())
				}
			}
		case isType:
			w.walk(tn.Type().(*types.Alias).Rhs())
		default:
			w.walk(obj.Type())
		}
		leaks = append(leaks, w.leaks...)
	}
	return leaks
}

// apiWalker collects the internal named types a type mentions where a
// caller sees them: not inside another package's types, nor in
// unexported fields and methods.
type apiWalker struct {
	at    string
	seen  map[types.Type]bool
	leaks []string
}

func (w *apiWalker) named(obj *types.TypeName) bool {
	if obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
		w.leaks = append(w.leaks, fmt.Sprintf("%s names %s.%s", w.at, strings.TrimPrefix(obj.Pkg().Path(), module+"/"), obj.Name()))
		return true
	}
	return false
}

func (w *apiWalker) walk(t types.Type) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		// An alias of another package names the type for the caller
		// (ggcr's remote.Backoff for its internal retry.Backoff).
		if !w.named(t.Obj()) && t.Obj().Pkg() != nil && strings.HasPrefix(t.Obj().Pkg().Path(), module+"/") {
			w.walk(t.Rhs())
		}
	case *types.Named:
		if !w.named(t.Obj()) {
			for a := range t.TypeArgs().Types() {
				w.walk(a)
			}
		}
	case *types.Pointer:
		w.walk(t.Elem())
	case *types.Slice:
		w.walk(t.Elem())
	case *types.Array:
		w.walk(t.Elem())
	case *types.Chan:
		w.walk(t.Elem())
	case *types.Map:
		w.walk(t.Key())
		w.walk(t.Elem())
	case *types.Signature:
		w.walk(t.Params())
		w.walk(t.Results())
	case *types.Tuple:
		for v := range t.Variables() {
			w.walk(v.Type())
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() {
				w.walk(f.Type())
			}
		}
	case *types.Interface:
		for m := range t.ExplicitMethods() {
			if m.Exported() {
				w.walk(m.Type())
			}
		}
		for e := range t.EmbeddedTypes() {
			w.walk(e)
		}
	case *types.TypeParam:
		w.walk(t.Constraint())
	}
}
