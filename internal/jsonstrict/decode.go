package jsonstrict

import (
	"encoding/json"
	"errors"
	"reflect"

	"github.com/gpuattest/gpuattest/internal/jsonpos"
	"github.com/gpuattest/gpuattest/internal/problem"
)

// Decode is the strict, typed half of reading a JSON document: it checks
// data as Check does (a syntax error, invalid UTF-8, a repeated key or
// nesting past maxDepth stops it), then against the shape of out's type
// as encoding/json decodes it, reporting every problem at once: an
// unknown field, a field without omitempty that is absent, a value of
// the wrong JSON type, a fraction where an integer belongs. Only a
// document with no problem is decoded into out (a pointer). Problems name
// file, line, column and field path; the caller's Validate adds the
// problems of meaning.
func Decode(file string, data []byte, maxDepth int, out any) problem.List {
	t := reflect.TypeOf(out)
	if t == nil || t.Kind() != reflect.Pointer {
		return problem.List{{File: file, Message: "jsonstrict.Decode: out must be a pointer"}}
	}
	s := &scanner{data: data, maxDepth: maxDepth, rootShape: shapeOf(t.Elem())}
	if err := s.document(false); err != nil {
		return toList(file, []*Error{err.(*Error)})
	}
	if len(s.probs) > 0 {
		return toList(file, s.probs)
	}
	if err := json.Unmarshal(data, out); err != nil {
		p := problem.Problem{File: file, Message: err.Error()}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			p.Path, p.Message = te.Field, "expected "+te.Type.String()+", got "+te.Value
		}
		if line, col, ok := jsonpos.OfError(data, err); ok {
			p.Line, p.Col = line, col
		}
		return problem.List{p}
	}
	return nil
}

// Problem returns e as a problem of file.
func (e *Error) Problem(file string) problem.Problem {
	return problem.Problem{File: file, Line: e.Line, Col: e.Col, Path: e.Path, Message: e.Msg}
}

func toList(file string, errs []*Error) problem.List {
	l := make(problem.List, len(errs))
	for i, e := range errs {
		l[i] = e.Problem(file)
	}
	return l
}
