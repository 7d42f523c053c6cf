package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/limits"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// MaxDepth is the deepest nesting of mappings and sequences a policy file
// may have; a policy needs three.
const MaxDepth = 32

// MaxRules is the most rules a policy may have: each is a CEL program to
// compile (a thousand rules take about half a second and 20 MB).
const MaxRules = 256

// MaxExprSize is the longest a rule's expression may be, in bytes: the
// CEL checker takes about a millisecond per kilobyte.
const MaxExprSize = 2 << 10

// checkYAML refuses what a policy file must not hold, before it is
// decoded: more than MaxSize bytes, nesting deeper than MaxDepth, a
// second document (which the decoder would silently ignore), tags such as
// !!binary, anchors and aliases. It returns the parsed file, nil when the
// YAML does not parse (the decoder then says why).
func checkYAML(name string, src []byte) (*ast.File, error) {
	if len(src) > MaxSize {
		return nil, problem.List{{File: name, Message: fmt.Sprintf("the policy is %d bytes, more than the limit of %d", len(src), MaxSize)}}
	}
	if line, col := limits.CheckYAMLNesting(src, MaxDepth); line > 0 {
		return nil, problem.List{{File: name, Line: line, Col: col, Message: fmt.Sprintf("nesting deeper than %d levels: a policy file may nest at most %d", MaxDepth, MaxDepth)}}
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, nil
	}
	var errs problem.List
	docs := 0
	for _, d := range f.Docs {
		if d.Body == nil {
			continue
		}
		if docs++; docs == 2 {
			pr := at(name, d.Body, "a second YAML document: a policy file holds one document")
			if d.Start != nil {
				pr.Line, pr.Col = d.Start.Position.Line, d.Start.Position.Column
			}
			pr.Hint = "remove the '---' and merge the rules into one list"
			errs = append(errs, pr)
		}
		ast.Walk(yamlChecker{name: name, errs: &errs}, d.Body)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

// yamlChecker walks a document and notes tags, anchors, aliases and deep
// nesting; depth is the nesting of the nodes it visits.
type yamlChecker struct {
	name  string
	depth int
	errs  *problem.List
}

// Visit implements ast.Visitor.
func (v yamlChecker) Visit(n ast.Node) ast.Visitor {
	switch n.(type) {
	case *ast.TagNode:
		*v.errs = append(*v.errs, at(v.name, n, fmt.Sprintf("tag %s: a policy file may not use YAML tags", n.GetToken().Value)))
		return nil
	case *ast.AnchorNode, *ast.AliasNode:
		*v.errs = append(*v.errs, at(v.name, n, "a policy file may not use YAML anchors or aliases"))
		return nil
	case *ast.MappingNode, *ast.SequenceNode:
		if v.depth >= MaxDepth {
			*v.errs = append(*v.errs, at(v.name, n, fmt.Sprintf("nesting deeper than %d levels: a policy file may nest at most %d", MaxDepth, MaxDepth)))
			return nil
		}
		v.depth++
	}
	return v
}

// at is a problem of file name at node n.
func at(name string, n ast.Node, msg string) problem.Problem {
	t := n.GetToken()
	return problem.Problem{File: name, Line: t.Position.Line, Col: t.Position.Column, Message: msg}
}

// yamlProblem places a goccy decoding error at its token, with goccy's
// source snippet.
func yamlProblem(name string, err error) problem.Problem {
	p := problem.Problem{File: name, Message: yaml.FormatError(err, false, true)}
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		pos := ye.GetToken().Position
		p.Line, p.Col, p.Message = pos.Line, pos.Column, ye.GetMessage()
		if _, src, ok := strings.Cut(yaml.FormatError(err, false, true), "\n"); ok {
			p.Snippet = src
		}
	}
	return p
}

// foldedComment reports whether expr holds a CEL line comment (// outside
// a string literal).
func foldedComment(expr string) bool {
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; {
		case c == '/' && i+1 < len(expr) && expr[i+1] == '/':
			return true
		case c == '"' || c == '\'':
			raw := i > 0 && (expr[i-1] == 'r' || expr[i-1] == 'R')
			i = skipCELString(expr, i, raw)
		}
	}
	return false
}

// skipCELString returns the index of the last byte of the CEL string
// literal starting at i (quoted with ' or ", single or triple).
func skipCELString(expr string, i int, raw bool) int {
	q := expr[i : i+1]
	if strings.HasPrefix(expr[i:], q+q+q) {
		q = q + q + q
	}
	for j := i + len(q); j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && !raw:
			j++
		case strings.HasPrefix(expr[j:], q):
			return j + len(q) - 1
		}
	}
	return len(expr)
}

// isFolded reports whether YAML joined the lines of a scalar the author
// wrote on several: a folded block (>) or a plain or quoted scalar that
// spans lines.
func isFolded(n ast.Node) bool {
	switch v := n.(type) {
	case *ast.LiteralNode:
		return v.Start != nil && v.Start.Type == token.FoldedType
	case *ast.StringNode:
		return strings.Contains(strings.TrimSpace(v.GetToken().Origin), "\n")
	}
	return false
}
