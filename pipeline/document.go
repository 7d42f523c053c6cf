package pipeline

import "reflect"

// Document is a YAML file other than a pipeline (a fleet file) decoded
// with a pipeline's rules: no tags, no merge keys, no unknown fields or
// duplicate keys, every type checked, every problem reported at once with
// its line, column and field path. Its Problem method places the
// caller's own validation problems the same way.
type Document struct {
	src *source
}

// DecodeDocument decodes data, read from path, into out (a pointer to a
// struct whose fields carry yaml tags; the spec's Duration, Size and
// Percent are checked as in a pipeline). what names the document in
// messages ("fleet file"). Problems are returned sorted; out is filled
// with what decoded when there are problems in some fields only, and
// Document is nil when nothing decoded.
func DecodeDocument(path string, data []byte, what string, out any) (*Document, Problems) {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("pipeline.DecodeDocument: out must point to a struct")
	}
	s := newSource(path, data)
	body, probs := s.document(docKind{noun: what, file: what, doc: what, multiHint: "put each " + what + " in its own file"})
	if probs != nil {
		return nil, probs.Sorted()
	}
	if !s.into(body, out, &probs) {
		return nil, probs.Sorted()
	}
	return &Document{src: s}, probs.Sorted()
}

// Problem returns a problem placed at the value of the field at path
// (such as classes[1].gres), or at the nearest enclosing field the file
// sets.
func (d *Document) Problem(path, hint, format string, args ...any) Problem {
	return d.src.problem(path, false, hint, format, args...)
}

// Has reports whether the file set the field at path.
func (d *Document) Has(path string) bool { return d.src.has(path) }

// Malformed reports whether the field at path was already reported as
// the wrong type (its value was dropped).
func (d *Document) Malformed(path string) bool { return d.src.bad[path] }
