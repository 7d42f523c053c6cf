package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Predicate is a predicate decoded once. The rules, coverage and the
// verifier's summary read the same tree, so that a large predicate is
// decoded once rather than once per reader, and so that every reader sees
// the same fields: keys match exactly, as in the rules, never by
// encoding/json's case-insensitive field matching ("Result" is not
// "result").
type Predicate struct {
	tree map[string]any
}

// DecodePredicate decodes raw, which must be a JSON object.
func DecodePredicate(raw json.RawMessage) (*Predicate, error) {
	var v any
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding predicate: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("predicate: expected a JSON object")
	}
	return &Predicate{tree: m}, nil
}

// String returns the top-level string field key, "" when it is missing or
// not a string.
func (p *Predicate) String(key string) string {
	s, _ := p.tree[key].(string)
	return s
}

// Bool returns the top-level boolean field key, false when it is missing
// or not a boolean.
func (p *Predicate) Bool(key string) bool {
	b, _ := p.tree[key].(bool)
	return b
}

// treeReader reads typed fields out of a decoded tree by exact key and
// keeps the first type error, named by its field path. A missing field or
// JSON null reads as the zero value. A path is a format (pathf) and the
// indexes it takes, formatted only for an error: a large predicate's
// fields are read without building a string for each.
type treeReader struct {
	err error
}

func (r *treeReader) fail(want, pathf string, idx []int) {
	if r.err == nil {
		args := make([]any, len(idx))
		for i, n := range idx {
			args[i] = n
		}
		r.err = fmt.Errorf("%s: expected %s", fmt.Sprintf(pathf, args...), want)
	}
}

func (r *treeReader) str(v any, pathf string, idx ...int) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		r.fail("a string", pathf, idx)
		return ""
	}
}

func (r *treeReader) bool(v any, pathf string, idx ...int) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	default:
		r.fail("true or false", pathf, idx)
		return false
	}
}

func (r *treeReader) obj(v any, pathf string, idx ...int) (map[string]any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, false
	case map[string]any:
		return v, true
	default:
		r.fail("an object", pathf, idx)
		return nil, false
	}
}

func (r *treeReader) arr(v any, pathf string, idx ...int) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	default:
		r.fail("an array", pathf, idx)
		return nil
	}
}

// coverageOf reads the part of a gpu-validation predicate coverage needs.
func coverageOf(t map[string]any) (covPredicate, error) {
	var r treeReader
	p := covPredicate{Result: r.str(t["result"], "result")}
	if b, ok := r.obj(t["build"], "build"); ok {
		p.Build = &covBuild{}
		for i, x := range r.arr(b["targets"], "build.targets") {
			if s, ok := x.(string); ok {
				p.Build.Targets = append(p.Build.Targets, s)
			} else if x != nil {
				r.fail("a string", "build.targets[%d]", []int{i})
			}
		}
	}
	for i, x := range r.arr(t["steps"], "steps") {
		s, ok := r.obj(x, "steps[%d]", i)
		if !ok {
			continue
		}
		st := covStep{ID: r.str(s["id"], "steps[%d].id", i), Kind: r.str(s["kind"], "steps[%d].kind", i),
			Verdict: r.str(s["verdict"], "steps[%d].verdict", i), Backend: r.str(s["backend"], "steps[%d].backend", i)}
		for j, y := range r.arr(s["devices"], "steps[%d].devices", i) {
			d, ok := r.obj(y, "steps[%d].devices[%d]", i, j)
			if !ok {
				continue
			}
			st.Devices = append(st.Devices, covDevice{UUID: r.str(d["uuid"], "steps[%d].devices[%d].uuid", i, j),
				Name:              r.str(d["name"], "steps[%d].devices[%d].name", i, j),
				ComputeCapability: r.str(d["compute_capability"], "steps[%d].devices[%d].compute_capability", i, j),
				Simulated:         r.bool(d["simulated"], "steps[%d].devices[%d].simulated", i, j)})
		}
		p.Steps = append(p.Steps, st)
		if r.err != nil {
			break
		}
	}
	return p, r.err
}
