package jsonstrict

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
)

// kind is what JSON value a Go type accepts.
type kind uint8

const (
	kindAny kind = iota
	kindObject
	kindMap
	kindArray
	kindString
	kindNumber
	kindInteger
	kindUnsigned
	kindBool
)

// shape is the JSON form of a Go type, as encoding/json decodes it.
type shape struct {
	kind     kind
	nullable bool
	// fields are a struct's members by JSON name; required counts those
	// without omitempty, numbered 0..required-1 by field.bit.
	fields   map[string]*field
	required []string
	// elem is the shape of a map's values or an array's items.
	elem *shape
}

type field struct {
	shape *shape
	// bit is the field's number among the required fields, -1 when the
	// field may be absent.
	bit int
}

var (
	shapes       sync.Map // reflect.Type -> *shape
	unmarshalerT = reflect.TypeFor[json.Unmarshaler]()
	rawMessageT  = reflect.TypeFor[json.RawMessage]()
	timeT        = reflect.TypeFor[time.Time]()
	anyShape     = &shape{kind: kindAny, nullable: true}
)

// shapeOf returns the shape of t, built once per type.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

func buildShape(t reflect.Type, seen map[reflect.Type]*shape) *shape {
	if s, ok := seen[t]; ok {
		return s
	}
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	switch {
	case t == timeT:
		return &shape{kind: kindString, nullable: nullable}
	case t == rawMessageT, reflect.PointerTo(t).Implements(unmarshalerT):
		return anyShape
	}
	s := &shape{nullable: nullable}
	seen[t] = s
	switch t.Kind() {
	case reflect.Struct:
		s.kind = kindObject
		s.fields = map[string]*field{}
		addFields(s, t, seen)
	case reflect.Map:
		s.kind, s.nullable = kindMap, true
		s.elem = buildShape(t.Elem(), seen)
	case reflect.Slice, reflect.Array:
		s.kind, s.nullable = kindArray, t.Kind() == reflect.Slice
		s.elem = buildShape(t.Elem(), seen)
	case reflect.String:
		s.kind = kindString
	case reflect.Bool:
		s.kind = kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.kind = kindInteger
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s.kind = kindUnsigned
	case reflect.Float32, reflect.Float64:
		s.kind = kindNumber
	default:
		s.kind, s.nullable = kindAny, true
	}
	return s
}

// addFields adds t's JSON fields to s, those of embedded structs
// included, as encoding/json names them.
func addFields(s *shape, t reflect.Type, seen map[reflect.Type]*shape) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, seen)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fd := &field{shape: buildShape(f.Type, seen), bit: -1}
		if !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,") {
			fd.bit = len(s.required)
			s.required = append(s.required, name)
		}
		s.fields[name] = fd
	}
}

// describe names what a shape accepts, for a message.
func (s *shape) describe() string {
	switch s.kind {
	case kindObject, kindMap:
		return "an object"
	case kindArray:
		return "an array"
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindInteger:
		return "an integer"
	case kindUnsigned:
		return "a non-negative integer"
	case kindBool:
		return "true or false"
	}
	return "a JSON value"
}

// accepts reports whether a value starting with byte c fits s.
func (s *shape) accepts(c byte) bool {
	switch {
	case s == nil || s.kind == kindAny:
		return true
	case c == 'n':
		return s.nullable
	}
	switch s.kind {
	case kindObject, kindMap:
		return c == '{'
	case kindArray:
		return c == '['
	case kindString:
		return c == '"'
	case kindNumber, kindInteger, kindUnsigned:
		return c == '-' || c >= '0' && c <= '9'
	case kindBool:
		return c == 't' || c == 'f'
	}
	return false
}

// valueName names a JSON value by its first byte.
func valueName(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	}
	return "a number"
}

// checkNumber reports a number that does not fit an integer shape.
func (s *shape) checkNumber(text []byte) string {
	if s == nil || (s.kind != kindInteger && s.kind != kindUnsigned) {
		return ""
	}
	if strings.ContainsAny(string(text), ".eE") {
		return fmt.Sprintf("%s: expected %s", text, s.describe())
	}
	if s.kind == kindUnsigned && len(text) > 0 && text[0] == '-' {
		return fmt.Sprintf("%s: expected %s", text, s.describe())
	}
	return ""
}
