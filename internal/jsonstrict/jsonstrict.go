package jsonstrict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gpuattest/gpuattest/internal/jsonpos"
)

// Error is a problem at one place in a document.
type Error struct {
	// Offset is the byte offset of the problem.
	Offset int
	// Line and Col are its 1-based position (Col counts bytes).
	Line, Col int
	// Path is the field path of the value it is in, such as
	// "subject[0].digest"; empty at the top level.
	Path string
	// Msg says what is wrong.
	Msg string
	// soft is set on a problem after which the document still decodes
	// (a required field's absence, an unknown field).
	soft bool
}

// Error returns "line:col: path: msg".
func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%d:%d: %s: %s", e.Line, e.Col, e.Path, e.Msg)
}

// Check reports the first syntax error, invalid UTF-8, repeated object
// key or nesting deeper than maxDepth (objects and arrays) in data, which
// must hold exactly one JSON value.
func Check(data []byte, maxDepth int) error {
	s := &scanner{data: data, maxDepth: maxDepth}
	return s.document(false)
}

// CheckObject is Check for data that must hold one JSON object; it also
// returns the object's members, each value a slice of data, so that a
// caller need not scan data again to split it.
func CheckObject(data []byte, maxDepth int) (map[string]json.RawMessage, error) {
	s := &scanner{data: data, maxDepth: maxDepth, top: map[string]json.RawMessage{}}
	if err := s.document(true); err != nil {
		return nil, err
	}
	return s.top, nil
}

// document reads data as exactly one JSON value; with object set, a
// valid value that is not an object is an error at its start.
func (s *scanner) document(object bool) error {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return s.errorf("unexpected end of input: expected a JSON value")
	}
	start := s.pos
	if err := s.value(s.rootShape); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos < len(s.data) {
		return s.errorf("unexpected %s after the top-level value", s.describe())
	}
	if object && s.data[start] != '{' {
		s.pos = start
		return s.errorf("unexpected %s: expected a JSON object", s.describe())
	}
	return nil
}

// frame is one open object or array.
type frame struct {
	object bool
	// key is the object key whose value is being read (inValue), index
	// the array index.
	key     string
	inValue bool
	index   int
	// keys holds the keys seen so far; small objects compare them in a
	// slice (which deeper objects reuse), large ones in a map.
	keys [][]byte
	set  map[string]struct{}
	// shape is what the container must hold (nil: anything); start is
	// its offset; have notes the required fields seen (the first 64 in
	// the bits, the rest in haveMore).
	shape    *shape
	start    int
	have     uint64
	haveMore map[int]bool
}

// smallObject is how many keys an object holds before its keys go into a
// map.
const smallObject = 16

func (f *frame) addKey(k []byte) bool {
	if f.set != nil {
		if _, dup := f.set[string(k)]; dup {
			return false
		}
		f.set[string(k)] = struct{}{}
		return true
	}
	for _, seen := range f.keys {
		if bytes.Equal(seen, k) {
			return false
		}
	}
	f.keys = append(f.keys, k)
	if len(f.keys) > smallObject {
		f.set = make(map[string]struct{}, 2*len(f.keys))
		for _, seen := range f.keys {
			f.set[string(seen)] = struct{}{}
		}
		f.keys = f.keys[:0]
	}
	return true
}

type scanner struct {
	data     []byte
	pos      int
	maxDepth int
	stack    []frame
	// top, when set, gets the members of the top-level object.
	top map[string]json.RawMessage
	// probs are the shape problems found so far (Decode); a syntax
	// error stops the scan, a shape problem does not.
	probs     []*Error
	rootShape *shape
}

// maxProblems is how many shape problems a scan reports.
const maxProblems = 100

func (s *scanner) value(sh *shape) error {
	c := s.data[s.pos]
	if !sh.accepts(c) {
		s.report(s.pos, "expected %s, got %s", sh.describe(), valueName(c))
		sh = nil
	}
	switch {
	case c == '{':
		return s.container(true, sh)
	case c == '[':
		return s.container(false, sh)
	case c == '"':
		_, err := s.str(false)
		return err
	case c == '-' || c >= '0' && c <= '9':
		start := s.pos
		if err := s.number(); err != nil {
			return err
		}
		if msg := sh.checkNumber(s.data[start:s.pos]); msg != "" {
			s.report(start, "%s", msg)
		}
		return nil
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.errorf("unexpected %s: expected a JSON value", s.describe())
}

// container reads an object or an array, iteratively for its elements
// and recursively (bounded by maxDepth) for nested containers.
func (s *scanner) container(object bool, sh *shape) error {
	if len(s.stack) >= s.maxDepth {
		return s.errorf("nesting deeper than %d levels", s.maxDepth)
	}
	if n := len(s.stack); n < cap(s.stack) {
		// Reuse the key slice of the last object closed at this depth.
		s.stack = s.stack[:n+1]
		s.stack[n] = frame{object: object, keys: s.stack[n].keys[:0], shape: sh, start: s.pos}
	} else {
		s.stack = append(s.stack, frame{object: object, shape: sh, start: s.pos})
	}
	defer func() { s.stack = s.stack[:len(s.stack)-1] }()
	// Nested containers may grow the stack and move it: the frame is
	// addressed by its depth, never by a pointer kept across them.
	depth := len(s.stack) - 1
	closing := byte(']')
	if object {
		closing = '}'
	}
	s.pos++
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == closing {
		s.pos++
		s.missing(depth)
		return nil
	}
	for n := 0; ; n++ {
		if object {
			if err := s.member(depth); err != nil {
				return err
			}
		} else {
			s.stack[depth].index = n
			var elem *shape
			if sh != nil {
				elem = sh.elem
			}
			if err := s.element(elem); err != nil {
				return err
			}
		}
		s.skipSpace()
		switch {
		case s.pos >= len(s.data):
			return s.errorf("unexpected end of input: expected ',' or '%c'", closing)
		case s.data[s.pos] == ',':
			s.pos++
			s.skipSpace()
		case s.data[s.pos] == closing:
			s.pos++
			s.missing(depth)
			return nil
		default:
			return s.errorf("unexpected %s: expected ',' or '%c'", s.describe(), closing)
		}
	}
}

// member reads `"key": value` of the object at depth.
func (s *scanner) member(depth int) error {
	f := &s.stack[depth]
	f.inValue = false
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return s.errorf("unexpected %s: expected an object key", s.describe())
	}
	start := s.pos
	k, err := s.str(true)
	if err != nil {
		return err
	}
	if !f.addKey(k) {
		s.pos = start
		return s.errorf("key %q appears twice in the object", k)
	}
	f.key, f.inValue = string(k), true
	sh := s.memberShape(f, k, start)
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return s.errorf("unexpected %s: expected ':' after the object key", s.describe())
	}
	s.pos++
	if s.top == nil || depth != 0 {
		return s.element(sh)
	}
	// f may move while the value is read (nested containers grow the
	// stack): the key is taken first.
	key := f.key
	s.skipSpace()
	start = s.pos
	if err := s.element(sh); err != nil {
		return err
	}
	s.top[key] = s.data[start:s.pos:s.pos]
	return nil
}

func (s *scanner) element(sh *shape) error {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return s.errorf("unexpected end of input: expected a JSON value")
	}
	return s.value(sh)
}

// memberShape returns the shape of the member k of the object f, and
// reports a key f's struct does not have (start is the key's offset).
func (s *scanner) memberShape(f *frame, k []byte, start int) *shape {
	switch {
	case f.shape == nil:
		return nil
	case f.shape.kind == kindMap:
		return f.shape.elem
	case f.shape.kind != kindObject:
		return nil
	}
	fd, ok := f.shape.fields[string(k)]
	if !ok {
		f.inValue = false
		if len(s.probs) < maxProblems {
			s.report(start, "unknown field %q", k)
			s.probs[len(s.probs)-1].soft = true
		}
		f.inValue = true
		return nil
	}
	switch {
	case fd.bit < 0:
	case fd.bit < 64:
		f.have |= 1 << fd.bit
	default:
		if f.haveMore == nil {
			f.haveMore = map[int]bool{}
		}
		f.haveMore[fd.bit] = true
	}
	return fd.shape
}

// missing reports the required fields the struct object at depth,
// just closed, did not have.
func (s *scanner) missing(depth int) {
	f := &s.stack[depth]
	if f.shape == nil || f.shape.kind != kindObject {
		return
	}
	for bit, name := range f.shape.required {
		if bit < 64 && f.have&(1<<bit) != 0 || bit >= 64 && f.haveMore[bit] {
			continue
		}
		if len(s.probs) >= maxProblems {
			return
		}
		f.inValue = false
		s.report(f.start, "missing")
		e := s.probs[len(s.probs)-1]
		e.soft = true
		if e.Path == "" {
			e.Path = name
		} else {
			e.Path += "." + name
		}
	}
}

// report notes a shape problem at offset pos, under the current path.
func (s *scanner) report(pos int, format string, args ...any) {
	if len(s.probs) >= maxProblems {
		return
	}
	line, col := jsonpos.LineCol(s.data, int64(pos))
	s.probs = append(s.probs, &Error{Offset: pos, Line: line, Col: col, Path: s.path(), Msg: fmt.Sprintf(format, args...)})
}

// str reads a string and returns its value when want is set (a slice of
// the document unless it holds escapes).
func (s *scanner) str(want bool) ([]byte, error) {
	start := s.pos
	s.pos++
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			raw := s.data[start:s.pos]
			switch {
			case !want:
				return nil, nil
			case !escaped:
				return raw[1 : len(raw)-1], nil
			}
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				s.pos = start
				return nil, s.errorf("invalid string: %v", err)
			}
			return []byte(v), nil
		case c == '\\':
			if err := s.escape(); err != nil {
				return nil, err
			}
			escaped = true
		case c < 0x20:
			return nil, s.errorf("control character %#02x in a string: expected it escaped", c)
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n <= 1 {
				return nil, s.errorf("invalid UTF-8 in a string")
			}
			s.pos += n
		}
	}
	return nil, s.errorf("unexpected end of input in a string")
}

// escape reads one backslash escape.
func (s *scanner) escape() error {
	if s.pos+1 >= len(s.data) {
		return s.errorf("unexpected end of input in a string escape")
	}
	switch s.data[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return nil
	case 'u':
		if s.pos+6 > len(s.data) {
			return s.errorf("unexpected end of input in a \\u escape")
		}
		if _, err := strconv.ParseUint(string(s.data[s.pos+2:s.pos+6]), 16, 16); err != nil {
			return s.errorf("invalid \\u escape %q", s.data[s.pos:s.pos+6])
		}
		s.pos += 6
		return nil
	}
	return s.errorf("invalid escape %q in a string", s.data[s.pos:s.pos+2])
}

// number reads a number as RFC 8259 spells it.
func (s *scanner) number() error {
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case s.digits() == 0:
		s.pos = start
		return s.errorf("invalid number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.errorf("invalid number: expected digits after '.'")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.errorf("invalid number: expected digits in the exponent")
		}
	}
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
		n++
	}
	return n
}

func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return s.errorf("unexpected %s: expected a JSON value", s.describe())
	}
	s.pos += len(word)
	return nil
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// describe names the byte at the current position for a message.
func (s *scanner) describe() string {
	if s.pos >= len(s.data) {
		return "end of input"
	}
	c := s.data[s.pos]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("character %q", c)
	}
	return fmt.Sprintf("byte %#02x", c)
}

func (s *scanner) errorf(format string, args ...any) error {
	line, col := jsonpos.LineCol(s.data, int64(s.pos))
	return &Error{Offset: s.pos, Line: line, Col: col, Path: s.path(), Msg: fmt.Sprintf(format, args...)}
}

// path spells the open containers as a field path.
func (s *scanner) path() string {
	var b strings.Builder
	for i, f := range s.stack {
		switch {
		case f.object && !f.inValue:
			return b.String()
		case !f.object:
			fmt.Fprintf(&b, "[%d]", f.index)
		case isIdent(f.key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		default:
			fmt.Fprintf(&b, "[%q]", f.key)
		}
	}
	return b.String()
}

func isIdent(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
