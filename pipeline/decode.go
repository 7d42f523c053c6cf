package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/internal/limits"
	"maps"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// LoadOption configures Load and Parse.
type LoadOption func(*loadOptions) error

type loadOptions struct {
	root string
}

// WithRoot names the directory the pipeline's root (its workdir) must
// stay inside, in place of the default: the enclosing git work tree, or
// the pipeline file's directory when there is none. Step paths stay
// inside the pipeline's root either way.
func WithRoot(dir string) LoadOption {
	return func(o *loadOptions) error {
		if dir == "" {
			return errors.New("pipeline.WithRoot: empty directory")
		}
		o.root = dir
		return nil
	}
}

// Load reads, decodes, validates and defaults the pipeline at path. Invalid
// input yields Problems listing every problem with its position.
func Load(path string, opts ...LoadOption) (*Pipeline, error) {
	data, err := limits.ReadFile(path, limits.PipelineBytes, "pipeline")
	if err != nil {
		return nil, fmt.Errorf("reading pipeline: %w", err)
	}
	return Parse(path, data, opts...)
}

// Parse decodes, validates and defaults a pipeline from data; path is used
// for positions and as the base of relative paths.
func Parse(path string, data []byte, opts ...LoadOption) (*Pipeline, error) {
	var o loadOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", path, err)
	}
	src := newSource(path, data)
	p, probs := src.decode()
	var l *layout
	if p != nil {
		if l, err = newLayout(filepath.Dir(abs), p.Workdir, o.root); err != nil {
			return nil, err
		}
		probs = append(probs, validate(p, src, l)...)
	}
	if len(probs) > 0 {
		return nil, probs.Sorted()
	}
	sum := sha256.Sum256(data)
	p.Path = path
	p.Dir = l.dir
	p.Root = l.root
	p.Digest = "sha256:" + hex.EncodeToString(sum[:])
	applyDefaults(p)
	return p, nil
}

// source is a pipeline file being decoded: its lines for snippets and the
// position of every field path seen in the YAML.
type source struct {
	path  string
	data  []byte
	lines []string
	pos   map[string]*token.Position // field path -> value position
	keys  map[string]*token.Position // field path -> key position
	bad   map[string]bool            // field paths already reported as malformed
}

func newSource(path string, data []byte) *source {
	return &source{
		path:  path,
		data:  data,
		lines: strings.Split(string(data), "\n"),
		pos:   map[string]*token.Position{},
		keys:  map[string]*token.Position{},
		bad:   map[string]bool{},
	}
}

// problem builds a Problem at the position of a field path (its value, or
// its key when atKey), falling back to the nearest enclosing path.
func (s *source) problem(path string, atKey bool, hint, format string, args ...any) Problem {
	p := Problem{File: s.path, Path: path, Message: fmt.Sprintf(format, args...), Hint: hint}
	if pos := s.lookup(path, atKey); pos != nil {
		p.Line, p.Col = pos.Line, pos.Column
		p.Snippet = snippet(s.lines, pos.Line, pos.Column)
	}
	return p
}

func (s *source) lookup(path string, atKey bool) *token.Position {
	for path != "" {
		if atKey {
			if pos, ok := s.keys[path]; ok {
				return pos
			}
		}
		if pos, ok := s.pos[path]; ok {
			return pos
		}
		path = parentPath(path)
		atKey = true
	}
	return s.pos[""]
}

// has reports whether the YAML set the field at path.
func (s *source) has(path string) bool {
	_, ok := s.keys[path]
	return ok
}

func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// pipelineDoc is how a pipeline file is named in the problems of reading it.
var pipelineDoc = docKind{
	noun: "pipeline", file: "pipeline file", doc: "pipeline document",
	emptyHint: "start with apiVersion: " + APIVersion + " and kind: " + KindPipeline,
	multiHint: "put each pipeline in its own file",
}

func (s *source) decode() (*Pipeline, Problems) {
	body, probs := s.document(pipelineDoc)
	if probs != nil {
		return nil, probs
	}
	var p Pipeline
	if !s.into(body, &p, &probs) {
		return nil, probs
	}
	return &p, probs
}

// docKind names a kind of YAML document in the problems of reading one.
type docKind struct {
	noun      string // "pipeline": what the file holds
	file      string // "pipeline file": the file itself
	doc       string // "pipeline document": what an empty file lacks
	emptyHint string // for an empty file
	multiHint string // for a file of several documents
}

// document reads s as exactly one YAML document of kind k, within the
// size and flow-nesting bounds (the parser's memory grows steeply with
// nesting, so they are checked before it runs) and with no tags, and
// returns its body.
func (s *source) document(k docKind) (ast.Node, Problems) {
	at := func(line, col int, hint, format string, args ...any) Problems {
		return Problems{s.at(&token.Position{Line: line, Column: col}, "", hint, format, args...)}
	}
	switch {
	case len(s.data) > limits.PipelineBytes:
		return nil, Problems{{File: s.path, Line: 1, Col: 1, Message: (&limits.TooLargeError{Name: s.path, What: k.noun, Limit: limits.PipelineBytes}).Error()}}
	case !utf8.Valid(s.data):
		line, col := invalidUTF8(s.data)
		return nil, at(line, col, "save the file as UTF-8; YAML is Unicode text", "invalid UTF-8: a %s must be UTF-8 text", k.file)
	}
	if line, col := limits.CheckYAMLNesting(s.data, limits.YAMLNesting); line > 0 {
		return nil, at(line, col, "a "+k.noun+" needs a few levels; this looks generated or hostile",
			"flow collections ([...] and {...}) nested deeper than %d", limits.YAMLNesting)
	}
	if len(bytes.TrimSpace(s.data)) == 0 {
		return nil, Problems{{File: s.path, Line: 1, Col: 1, Message: "empty file: expected a " + k.doc, Hint: k.emptyHint}}
	}
	file, err := parser.ParseBytes(s.data, 0, parser.AllowDuplicateMapKey())
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
		return nil, Problems{{File: s.path, Line: 1, Col: 1, Message: "no YAML document: expected a " + k.noun}}
	case len(docs) > 1:
		pos := docs[1].GetToken().Position
		return nil, at(pos.Line, pos.Column, k.multiHint, "more than one YAML document: expected exactly one %s", k.noun)
	}
	if probs := s.tags(docs[0]); len(probs) > 0 {
		return nil, probs
	}
	return docs[0], nil
}

// into checks body against the type out points to, reporting every
// problem into probs, and decodes into out what is left: check prunes
// every node it reported, so the caller's semantic pass can report the
// rest in the same run. It reports whether anything decoded.
func (s *source) into(body ast.Node, out any, probs *Problems) bool {
	s.pos[""] = nodePos(body)
	if !s.check(body, reflect.TypeOf(out).Elem(), "", probs) {
		return false
	}
	if err := yaml.NodeToValue(body, out); err != nil {
		*probs = append(*probs, s.yamlError(err))
		return false
	}
	return true
}

// invalidUTF8 is the 1-based line and column (in characters) of the
// first byte of data that is not UTF-8.
func invalidUTF8(data []byte) (line, col int) {
	line, col = 1, 1
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n <= 1 {
			return line, col
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		data = data[n:]
	}
	return line, col
}

// tags reports every YAML tag (!!binary, !!str, a local !tag) in node: a
// tag changes what a value decodes to behind the text a reviewer reads
// (`run: !!binary ZWNobyBoaQ==` runs "echo hi").
func (s *source) tags(node ast.Node) Problems {
	var probs Problems
	ast.Walk(tagVisitor(func(n *ast.TagNode) {
		pos := n.GetToken().Position
		probs = append(probs, s.at(pos, "", "write the value itself; a pipeline uses no YAML tags", "YAML tag %s: tags are not allowed in a pipeline", n.Start.Value))
	}), node)
	return probs
}

// tagVisitor calls itself on every tag node.
type tagVisitor func(*ast.TagNode)

// Visit implements ast.Visitor.
func (f tagVisitor) Visit(n ast.Node) ast.Visitor {
	if t, ok := n.(*ast.TagNode); ok {
		f(t)
	}
	return f
}

// yamlError turns a goccy error into a positioned problem.
func (s *source) yamlError(err error) Problem {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		pos := ye.GetToken().Position
		return Problem{File: s.path, Line: pos.Line, Col: pos.Column, Message: ye.GetMessage(),
			Snippet: snippet(s.lines, pos.Line, pos.Column)}
	}
	return Problem{File: s.path, Message: err.Error()}
}

var (
	commandType  = reflect.TypeOf(Command{})
	durationType = reflect.TypeOf(Duration{})
	sizeType     = reflect.TypeOf(Size{})
	percentType  = reflect.TypeOf(Percent{})
	repeatsType  = reflect.TypeOf(Repeats{})
	roundsType   = reflect.TypeOf(Rounds{})
)

// check walks node against Go type t, recording positions and reporting
// unknown fields, duplicate keys and wrong types, all of them. Unknown and
// duplicate keys are removed from their mapping; check returns false when
// node itself has the wrong type, and the caller replaces it with null.
func (s *source) check(node ast.Node, t reflect.Type, path string, probs *Problems) bool {
	node = unwrap(node)
	if node == nil || node.Type() == ast.NullType {
		return true
	}
	if _, ok := s.pos[path]; !ok || path == "" {
		s.pos[path] = nodePos(node)
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if ok, special := s.checkSpecial(node, t, path, probs); special {
		return ok
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return s.checkMapping(node, t, path, probs)
	case reflect.Slice:
		return s.checkSequence(node, t, path, probs)
	}
	return s.checkScalar(node, t, path, probs)
}

// checkSpecial checks the spec's types with YAML forms of their own (a
// command, repeats, a duration); special is false for any other type.
func (s *source) checkSpecial(node ast.Node, t reflect.Type, path string, probs *Problems) (ok, special bool) {
	switch {
	case t == commandType:
		switch node.Type() {
		case ast.StringType, ast.LiteralType:
			return true, true
		case ast.SequenceType:
			return s.check(node, reflect.TypeOf([]string{}), path, probs), true
		}
		*probs = append(*probs, s.typeProblem(path, "a shell string or a list of strings", node))
		return false, true
	case t == repeatsType, t == roundsType:
		if node.Type() == ast.IntegerType || (node.Type() == ast.StringType && node.GetToken().Value == RepeatsAuto) {
			return true, true
		}
		*probs = append(*probs, s.typeProblem(path, "a positive integer or auto", node))
		return false, true
	case t == durationType:
		_, err := NewDuration(node.GetToken().Value)
		if node.Type() != ast.StringType || err != nil {
			hint := "use a number with a unit: 90s, 10m, 1h30m"
			if _, nerr := strconv.Atoi(node.GetToken().Value); nerr == nil {
				hint = fmt.Sprintf("add a unit: %ss", node.GetToken().Value)
			}
			*probs = append(*probs, s.at(node.GetToken().Position, path, hint, "unparsable duration %s", quoteIfString(node)))
			return false, true
		}
		return true, true
	case t == sizeType:
		return s.checkScalarValue(node, path, probs, "e.g. 8GiB", func(v string) error { _, err := NewSize(v); return err }), true
	case t == percentType:
		return s.checkScalarValue(node, path, probs, "e.g. 3%", func(v string) error { _, err := NewPercent(v); return err }), true
	}
	return false, false
}

// checkScalarValue checks a string or number that parse must accept.
func (s *source) checkScalarValue(node ast.Node, path string, probs *Problems, hint string, parse func(string) error) bool {
	switch node.Type() {
	case ast.StringType, ast.IntegerType, ast.FloatType:
	default:
		*probs = append(*probs, s.typeProblem(path, "a string or a number", node))
		return false
	}
	if err := parse(node.GetToken().Value); err != nil {
		*probs = append(*probs, s.at(node.GetToken().Position, path, hint, "%v", err))
		return false
	}
	return true
}

// quoteIfString renders a scalar as the user wrote it: quoted when it is
// a string.
func quoteIfString(node ast.Node) string {
	if node.Type() == ast.StringType {
		return strconv.Quote(node.GetToken().Value)
	}
	return node.GetToken().Value
}

// checkMapping checks a struct (known fields only) or a map, and drops
// the entries it reports from the node.
func (s *source) checkMapping(node ast.Node, t reflect.Type, path string, probs *Problems) bool {
	m, ok := asMapping(node)
	if !ok {
		*probs = append(*probs, s.typeProblem(path, "a mapping", node))
		return false
	}
	var fields map[string]reflect.StructField // nil for a map: any key
	if t.Kind() == reflect.Struct {
		fields = yamlFields(t)
	}
	seen := map[string]*token.Position{}
	kept := m.Values[:0:0]
	for _, mv := range m.Values {
		key, kpos, ok := s.key(mv, path, probs)
		if !ok {
			continue
		}
		fpath := join(path, key)
		if first, dup := seen[key]; dup {
			*probs = append(*probs, s.at(kpos, fpath, "", "duplicate key %q (first set at line %d)", key, first.Line))
			continue
		}
		seen[key] = kpos
		var elem reflect.Type
		if fields == nil {
			elem = t.Elem()
		} else {
			f, known := fields[key]
			if !known {
				*probs = append(*probs, s.at(kpos, fpath, suggest(key, fieldNames(fields)), "unknown field %q in %s", key, describe(t)))
				continue
			}
			elem = f.Type
		}
		s.keys[fpath] = kpos
		if s.check(mv.Value, elem, fpath, probs) {
			kept = append(kept, mv)
		} else {
			s.bad[fpath] = true
		}
	}
	m.Values = kept
	return true
}

// checkSequence checks a list, and drops the items it reports from the
// node.
func (s *source) checkSequence(node ast.Node, t reflect.Type, path string, probs *Problems) bool {
	seq, ok := node.(*ast.SequenceNode)
	if !ok {
		*probs = append(*probs, s.typeProblem(path, "a list", node))
		return false
	}
	kept := seq.Values[:0:0]
	for i, v := range seq.Values {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if v != nil {
			s.keys[ipath] = unwrap(v).GetToken().Position
		}
		if s.check(v, t.Elem(), ipath, probs) {
			kept = append(kept, v)
		}
	}
	seq.Values = kept
	return true
}

// checkScalar checks a string, bool or number.
func (s *source) checkScalar(node ast.Node, t reflect.Type, path string, probs *Problems) bool {
	switch t.Kind() {
	case reflect.String:
		if node.Type() != ast.StringType && node.Type() != ast.LiteralType {
			p := s.typeProblem(path, "a string", node)
			if isScalar(node) {
				p.Hint = fmt.Sprintf("quote it: %q", node.GetToken().Value)
			}
			*probs = append(*probs, p)
			return false
		}
	case reflect.Bool:
		if node.Type() != ast.BoolType {
			*probs = append(*probs, s.typeProblem(path, "true or false", node))
			return false
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		if node.Type() != ast.IntegerType {
			*probs = append(*probs, s.typeProblem(path, "an integer", node))
			return false
		}
	case reflect.Float64, reflect.Float32:
		if node.Type() != ast.IntegerType && node.Type() != ast.FloatType {
			*probs = append(*probs, s.typeProblem(path, "a number", node))
			return false
		}
	}
	return true
}

// key extracts a mapping key as a string.
func (s *source) key(mv *ast.MappingValueNode, path string, probs *Problems) (string, *token.Position, bool) {
	k := unwrap(mv.Key)
	if k == nil {
		return "", nil, false
	}
	pos := k.GetToken().Position
	if k.Type() == ast.MergeKeyType {
		*probs = append(*probs, s.at(pos, path, "write the fields out; merge keys hide what a step really runs", "merge keys (<<) are not supported"))
		return "", nil, false
	}
	if !isScalar(k) {
		*probs = append(*probs, s.at(pos, path, "", "mapping key must be a string"))
		return "", nil, false
	}
	return k.GetToken().Value, pos, true
}

func (s *source) at(pos *token.Position, path, hint, format string, args ...any) Problem {
	p := Problem{File: s.path, Path: path, Message: fmt.Sprintf(format, args...), Hint: hint}
	if pos != nil {
		p.Line, p.Col = pos.Line, pos.Column
		p.Snippet = snippet(s.lines, pos.Line, pos.Column)
	}
	return p
}

func (s *source) typeProblem(path, want string, node ast.Node) Problem {
	return s.at(node.GetToken().Position, path, "", "%s: expected %s, got %s", displayPath(path), want, nodeKind(node))
}

func displayPath(p string) string {
	if p == "" {
		return "document"
	}
	return p
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// asMapping returns node as a mapping. goccy wraps every mapping in a
// MappingNode; a bare MappingValueNode is taken as a one-entry mapping.
func asMapping(node ast.Node) (*ast.MappingNode, bool) {
	switch m := node.(type) {
	case *ast.MappingNode:
		return m, true
	case *ast.MappingValueNode:
		return &ast.MappingNode{Values: []*ast.MappingValueNode{m}}, true
	}
	return nil, false
}

// nodePos is where a node starts: a block mapping's token is the colon of
// its first entry, so use that entry's key instead.
func nodePos(n ast.Node) *token.Position {
	switch m := n.(type) {
	case *ast.MappingNode:
		if !m.IsFlowStyle && len(m.Values) > 0 && m.Values[0].Key != nil {
			return m.Values[0].Key.GetToken().Position
		}
	case *ast.MappingValueNode:
		if m.Key != nil {
			return m.Key.GetToken().Position
		}
	}
	return n.GetToken().Position
}

func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.MappingKeyNode:
			n = v.Value
		default:
			return n
		}
	}
}

func isScalar(n ast.Node) bool {
	switch n.Type() {
	case ast.StringType, ast.IntegerType, ast.FloatType, ast.BoolType, ast.NullType, ast.InfinityType, ast.NanType, ast.LiteralType:
		return true
	}
	return false
}

func nodeKind(n ast.Node) string {
	switch n.Type() {
	case ast.StringType, ast.LiteralType:
		return "a string"
	case ast.IntegerType:
		return "an integer"
	case ast.FloatType, ast.InfinityType, ast.NanType:
		return "a number"
	case ast.BoolType:
		return "a boolean"
	case ast.MappingType, ast.MappingValueType:
		return "a mapping"
	case ast.SequenceType:
		return "a list"
	case ast.AliasType:
		return "an alias"
	}
	return strings.ToLower(n.Type().String())
}

// yamlFields maps a struct's YAML keys to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
			// An inline struct's keys are the outer mapping's (a fleet
			// file's engine settings).
			maps.Copy(out, yamlFields(f.Type))
			continue
		}
		if name == "-" || name == "" {
			continue
		}
		out[name] = f
	}
	return out
}

func fieldNames(m map[string]reflect.StructField) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func describe(t reflect.Type) string {
	if t.Name() == "" && t.Kind() == reflect.Struct && t.NumField() > 0 {
		return describe(t.Field(0).Type) // a struct of inline parts: its first
	}
	switch t {
	case reflect.TypeOf(Pipeline{}):
		return "pipeline"
	case reflect.TypeOf(Step{}):
		return "step"
	}
	return strings.ToLower(t.Name())
}

// suggest returns a "did you mean" hint for a misspelt name.
func suggest(got string, names []string) string {
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := levenshtein(strings.ToLower(got), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" && bestD <= max(1, len(got)/3) && bestD < len(got) {
		return fmt.Sprintf("did you mean %q?", best)
	}
	if len(names) > 0 && len(names) <= 12 {
		return "expected one of: " + strings.Join(names, ", ")
	}
	return ""
}

// levenshtein is the optimal-string-alignment distance (a swap of two
// neighbours counts as one edit).
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
