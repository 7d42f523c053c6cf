package pipeline

import (
	"bytes"
	"reflect"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
	"github.com/gpuattest/gpuattest/internal/limits"
)

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
	at := func(line, col int, hint, format string, args ...any) Problems {
		return Problems{s.at(&token.Position{Line: line, Column: col}, "", hint, format, args...)}
	}
	switch {
	case len(data) > limits.PipelineBytes:
		return nil, Problems{{File: path, Line: 1, Col: 1, Message: (&limits.TooLargeError{Name: path, What: what, Limit: limits.PipelineBytes}).Error()}}
	case !utf8.Valid(data):
		line, col := invalidUTF8(data)
		return nil, at(line, col, "save the file as UTF-8", "invalid UTF-8: a %s must be UTF-8 text", what)
	case len(bytes.TrimSpace(data)) == 0:
		return nil, at(1, 1, "", "empty file: expected a %s", what)
	}
	if line, col := limits.CheckYAMLNesting(data, limits.YAMLNesting); line > 0 {
		return nil, at(line, col, "", "flow collections ([...] and {...}) nested deeper than %d", limits.YAMLNesting)
	}
	file, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, Problems{s.yamlError(err)}
	}
	var docs []ast.Node
	for _, d := range file.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d.Body)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, at(1, 1, "", "no YAML document: expected a %s", what)
	case len(docs) > 1:
		pos := docs[1].GetToken().Position
		return nil, at(pos.Line, pos.Column, "", "more than one YAML document: expected exactly one %s", what)
	}
	if probs := s.tags(docs[0]); len(probs) > 0 {
		return nil, probs.Sorted()
	}
	var probs Problems
	s.pos[""] = nodePos(docs[0])
	if !s.check(docs[0], rv.Elem().Type(), "", &probs) {
		return nil, probs.Sorted()
	}
	if err := yaml.NodeToValue(docs[0], out); err != nil {
		return nil, append(probs, s.yamlError(err)).Sorted()
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
