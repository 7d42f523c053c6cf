package jsonstrict

import (
	"encoding/json"
	"errors"
	"reflect"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/jsonpos"
)

// Validator is a decoded document that can say what is wrong with its
// values (each problem with its field path; positions are added by Read
// where the reader knows them).
type Validator interface {
	Validate() problem.List
}

// Read is the one way gpuattest reads a JSON document that others wrote,
// once its bytes are read within their bound: strict syntax (Check), the
// shape of out's Go type, a typed decode into out, then out.Validate,
// every problem reported at once in one problem.List naming file, line,
// column and field path. A syntax problem stops it; a value of the wrong
// type stops it before Validate; a missing required field or an unknown
// one does not (Validate's own problem at a path already reported is
// dropped).
func Read(file string, data []byte, maxDepth int, out Validator) problem.List {
	probs, decoded := decode(file, data, maxDepth, out)
	if !decoded {
		return probs
	}
	reported := map[string]bool{}
	for _, p := range probs {
		reported[p.Path] = true
	}
	for _, p := range out.Validate() {
		if !reported[p.Path] {
			if p.File == "" {
				p.File = file
			}
			probs = append(probs, p)
		}
	}
	return probs
}

// Decode is Read without Validate: out (a pointer) is filled when the
// document has no problem, or only missing or unknown fields.
func Decode(file string, data []byte, maxDepth int, out any) problem.List {
	probs, _ := decode(file, data, maxDepth, out)
	return probs
}

// decode checks data and decodes it into out; decoded is false when out
// was not filled (a syntax problem, or a shape problem other than a
// missing or unknown field).
func decode(file string, data []byte, maxDepth int, out any) (probs problem.List, decoded bool) {
	t := reflect.TypeOf(out)
	if t == nil || t.Kind() != reflect.Pointer {
		return problem.List{{File: file, Message: "jsonstrict: out must be a pointer"}}, false
	}
	s := &scanner{data: data, maxDepth: maxDepth, rootShape: shapeOf(t.Elem())}
	if err := s.document(false); err != nil {
		return problem.List{err.(*Error).Problem(file)}, false
	}
	soft := true
	for _, e := range s.probs {
		probs = append(probs, e.Problem(file))
		soft = soft && e.soft
	}
	if !soft {
		return probs, false
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
		return append(probs, p), false
	}
	return probs, true
}

// Problem returns e as a problem of file.
func (e *Error) Problem(file string) problem.Problem {
	return problem.Problem{File: file, Line: e.Line, Col: e.Col, Path: e.Path, Message: e.Msg}
}
