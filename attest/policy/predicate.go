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
// JSON null reads as the zero value.
type treeReader struct {
	err error
}

func (r *treeReader) fail(path, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: expected %s", path, want)
	}
}

func (r *treeReader) str(m map[string]any, key, path string) string {
	switch v := m[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		r.fail(path, "a string")
		return ""
	}
}

func (r *treeReader) bool(m map[string]any, key, path string) bool {
	switch v := m[key].(type) {
	case nil:
		return false
	case bool:
		return v
	default:
		r.fail(path, "true or false")
		return false
	}
}

func (r *treeReader) obj(v any, path string) (map[string]any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, false
	case map[string]any:
		return v, true
	default:
		r.fail(path, "an object")
		return nil, false
	}
}

func (r *treeReader) arr(m map[string]any, key, path string) []any {
	switch v := m[key].(type) {
	case nil:
		return nil
	case []any:
		return v
	default:
		r.fail(path, "an array")
		return nil
	}
}

// coverageOf reads the part of a gpu-validation predicate coverage needs.
func coverageOf(t map[string]any) (covPredicate, error) {
	var r treeReader
	p := covPredicate{Result: r.str(t, "result", "result")}
	if b, ok := r.obj(t["build"], "build"); ok {
		p.Build = &covBuild{}
		for i, x := range r.arr(b, "targets", "build.targets") {
			path := fmt.Sprintf("build.targets[%d]", i)
			if s, ok := x.(string); ok {
				p.Build.Targets = append(p.Build.Targets, s)
			} else if x != nil {
				r.fail(path, "a string")
			}
		}
	}
	for i, x := range r.arr(t, "steps", "steps") {
		path := fmt.Sprintf("steps[%d]", i)
		s, ok := r.obj(x, path)
		if !ok {
			continue
		}
		st := covStep{ID: r.str(s, "id", path+".id"), Kind: r.str(s, "kind", path+".kind"),
			Verdict: r.str(s, "verdict", path+".verdict"), Backend: r.str(s, "backend", path+".backend")}
		for j, y := range r.arr(s, "devices", path+".devices") {
			dpath := fmt.Sprintf("%s.devices[%d]", path, j)
			d, ok := r.obj(y, dpath)
			if !ok {
				continue
			}
			st.Devices = append(st.Devices, covDevice{UUID: r.str(d, "uuid", dpath+".uuid"), Name: r.str(d, "name", dpath+".name"),
				ComputeCapability: r.str(d, "compute_capability", dpath+".compute_capability"), Simulated: r.bool(d, "simulated", dpath+".simulated")})
		}
		p.Steps = append(p.Steps, st)
		if r.err != nil {
			break
		}
	}
	return p, r.err
}
