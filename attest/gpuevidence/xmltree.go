package gpuevidence

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// A small XML tree and Canonical XML 1.1 (W3C, 2 May 2008) without
// comments, as much of it as NVIDIA's RIMs need and no more: anything
// the canonical form would have to treat specially (a DTD, processing
// instructions in the document, xml:* attributes, whitespace characters
// in attribute values whose source form is lost) is refused rather than
// canonicalized approximately. A signature this code cannot reproduce
// exactly fails; it never passes by accident.

// Bounds on a RIM document.
const (
	maxXMLDepth    = 32
	maxXMLElements = 4096
)

const nsXML = "http://www.w3.org/XML/1998/namespace"

type xmlAttr struct {
	prefix, local, value string
}

func (a xmlAttr) qname() string {
	if a.prefix == "" {
		return a.local
	}
	return a.prefix + ":" + a.local
}

// xmlNode is an element or a run of text (elem == nil).
type xmlNode struct {
	// text is a text node's character data.
	text string
	elem *xmlElem
}

type xmlElem struct {
	prefix, local string
	// ns are the namespace declarations on the element, prefix ("" for
	// the default namespace) to URI.
	ns       map[string]string
	attrs    []xmlAttr
	children []xmlNode
	parent   *xmlElem
	line     int
}

func (e *xmlElem) qname() string {
	if e.prefix == "" {
		return e.local
	}
	return e.prefix + ":" + e.local
}

// lookup resolves prefix in e's scope; "" is the default namespace.
func (e *xmlElem) lookup(prefix string) (string, bool) {
	if prefix == "xml" {
		return nsXML, true
	}
	for x := e; x != nil; x = x.parent {
		if u, ok := x.ns[prefix]; ok {
			return u, true
		}
	}
	return "", prefix == ""
}

// space is e's namespace URI.
func (e *xmlElem) space() string {
	u, _ := e.lookup(e.prefix)
	return u
}

// is reports whether e is the element local in namespace space.
func (e *xmlElem) is(space, local string) bool {
	return e.local == local && e.space() == space
}

// attr returns the value of the attribute local in namespace space
// ("" for an unqualified attribute).
func (e *xmlElem) attr(space, local string) (string, bool) {
	for _, a := range e.attrs {
		if a.local != local {
			continue
		}
		if a.prefix == "" && space == "" {
			return a.value, true
		}
		if a.prefix != "" {
			if u, _ := e.lookup(a.prefix); u == space {
				return a.value, true
			}
		}
	}
	return "", false
}

// elems returns e's child elements named local in namespace space.
func (e *xmlElem) elems(space, local string) []*xmlElem {
	var out []*xmlElem
	for _, c := range e.children {
		if c.elem != nil && c.elem.is(space, local) {
			out = append(out, c.elem)
		}
	}
	return out
}

// walk calls f for e and every element below it, in document order.
func (e *xmlElem) walk(f func(*xmlElem)) {
	f(e)
	for _, c := range e.children {
		if c.elem != nil {
			c.elem.walk(f)
		}
	}
}

// parseXML reads a whole document into a tree. Comments are dropped
// (the canonical form without comments has none); an XML declaration
// is allowed, any other processing instruction or a DTD is refused.
func parseXML(data []byte) (*xmlElem, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var root, cur *xmlElem
	count := 0
	depth := 0
	for {
		line, _ := d.InputPos()
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if cur == nil && root != nil {
				return nil, fmt.Errorf("XML line %d: a second document element", line)
			}
			count++
			depth++
			if count > maxXMLElements || depth > maxXMLDepth {
				return nil, fmt.Errorf("XML line %d: more than %d elements or %d levels", line, maxXMLElements, maxXMLDepth)
			}
			e := &xmlElem{prefix: t.Name.Space, local: t.Name.Local, parent: cur, line: line}
			for _, a := range t.Attr {
				switch {
				case a.Name.Space == "" && a.Name.Local == "xmlns":
					e.setNS("", a.Value)
				case a.Name.Space == "xmlns":
					if a.Value == "" {
						return nil, fmt.Errorf("XML line %d: xmlns:%s undeclares a prefix (XML 1.1 only)", line, a.Name.Local)
					}
					e.setNS(a.Name.Local, a.Value)
				case a.Name.Space == "xml":
					return nil, fmt.Errorf("XML line %d: attribute xml:%s is not supported in a RIM", line, a.Name.Local)
				default:
					if strings.ContainsAny(a.Value, "\t\n\r") {
						return nil, fmt.Errorf("XML line %d: attribute %s holds a tab or line break (not supported in a RIM)", line, a.Name.Local)
					}
					e.attrs = append(e.attrs, xmlAttr{prefix: a.Name.Space, local: a.Name.Local, value: a.Value})
				}
			}
			if cur == nil {
				root = e
			} else {
				cur.children = append(cur.children, xmlNode{elem: e})
			}
			cur = e
		case xml.EndElement:
			if cur == nil || t.Name.Space != cur.prefix || t.Name.Local != cur.local {
				return nil, fmt.Errorf("XML line %d: unexpected end tag %s", line, t.Name.Local)
			}
			cur = cur.parent
			depth--
		case xml.CharData:
			if cur == nil {
				if len(bytes.TrimSpace(t)) != 0 {
					return nil, fmt.Errorf("XML line %d: text outside the document element", line)
				}
				continue
			}
			if n := len(cur.children); n > 0 && cur.children[n-1].elem == nil {
				cur.children[n-1].text += string(t)
			} else {
				cur.children = append(cur.children, xmlNode{text: string(t)})
			}
		case xml.Comment:
		case xml.ProcInst:
			if t.Target != "xml" || root != nil {
				return nil, fmt.Errorf("XML line %d: processing instruction <?%s?> is not supported in a RIM", line, t.Target)
			}
		case xml.Directive:
			return nil, fmt.Errorf("XML line %d: <!%s> (a DTD) is not supported in a RIM", line, strings.Fields(string(t) + " ")[0])
		}
	}
	if root == nil {
		return nil, errors.New("XML: no document element")
	}
	if cur != nil {
		return nil, fmt.Errorf("XML: element %s not closed", cur.qname())
	}
	// Every prefix must resolve.
	var err error
	root.walk(func(e *xmlElem) {
		if _, ok := e.lookup(e.prefix); !ok && err == nil {
			err = fmt.Errorf("XML line %d: prefix %q of %s is not declared", e.line, e.prefix, e.qname())
		}
		for _, a := range e.attrs {
			if _, ok := e.lookup(a.prefix); a.prefix != "" && !ok && err == nil {
				err = fmt.Errorf("XML line %d: prefix %q of attribute %s is not declared", e.line, a.prefix, a.qname())
			}
		}
	})
	return root, err
}

func (e *xmlElem) setNS(prefix, uri string) {
	if e.ns == nil {
		e.ns = map[string]string{}
	}
	e.ns[prefix] = uri
}

// inScope returns the namespaces in scope at e, prefix to URI.
func (e *xmlElem) inScope() map[string]string {
	m := map[string]string{}
	var chain []*xmlElem
	for x := e; x != nil; x = x.parent {
		chain = append(chain, x)
	}
	for _, x := range slices.Backward(chain) {
		for p, u := range x.ns {
			m[p] = u
		}
	}
	return m
}

// canonicalize writes the canonical form (C14N 1.1 without comments) of
// the document subset rooted at apex, leaving out the element skip (and
// what is below it) when it is not nil: the enveloped-signature
// transform. apex's ancestors are not in the subset; their namespace
// declarations in scope at apex are rendered on it.
func canonicalize(apex, skip *xmlElem) []byte {
	var b bytes.Buffer
	// Nothing above apex is rendered, so every namespace in scope at
	// apex is rendered on it.
	writeElem(&b, apex, skip, map[string]string{}, apex.inScope())
	return b.Bytes()
}

func writeElem(b *bytes.Buffer, e, skip *xmlElem, rendered, scope map[string]string) {
	// Namespace declarations: those in scope whose value differs from
	// what the nearest output ancestor rendered. The default namespace
	// is rendered empty (xmlns="") only to undo a rendered non-empty one.
	var decl []string
	for p, u := range scope {
		r, ok := rendered[p]
		if p == "" && u == "" {
			if ok && r != "" {
				decl = append(decl, p)
			}
			continue
		}
		if !ok || r != u {
			decl = append(decl, p)
		}
	}
	sort.Strings(decl) // "" (the default namespace) sorts first
	b.WriteByte('<')
	b.WriteString(e.qname())
	next := rendered
	if len(decl) > 0 {
		next = make(map[string]string, len(rendered)+len(decl))
		for p, u := range rendered {
			next[p] = u
		}
	}
	for _, p := range decl {
		if p == "" {
			b.WriteString(` xmlns="`)
		} else {
			b.WriteString(` xmlns:` + p + `="`)
		}
		writeEscaped(b, scope[p], true)
		b.WriteByte('"')
		next[p] = scope[p]
	}
	attrs := slices.Clone(e.attrs)
	key := func(a xmlAttr) string {
		if a.prefix == "" {
			return ""
		}
		return scope[a.prefix]
	}
	sort.SliceStable(attrs, func(i, j int) bool {
		si, sj := key(attrs[i]), key(attrs[j])
		if si != sj {
			return si < sj
		}
		return attrs[i].local < attrs[j].local
	})
	for _, a := range attrs {
		b.WriteByte(' ')
		b.WriteString(a.qname())
		b.WriteString(`="`)
		writeEscaped(b, a.value, true)
		b.WriteByte('"')
	}
	b.WriteByte('>')
	for _, c := range e.children {
		switch {
		case c.elem == nil:
			writeEscaped(b, c.text, false)
		case c.elem == skip:
		default:
			childScope := scope
			if len(c.elem.ns) > 0 {
				childScope = make(map[string]string, len(scope)+len(c.elem.ns))
				for p, u := range scope {
					childScope[p] = u
				}
				for p, u := range c.elem.ns {
					childScope[p] = u
				}
			}
			writeElem(b, c.elem, skip, next, childScope)
		}
	}
	b.WriteString("</")
	b.WriteString(e.qname())
	b.WriteByte('>')
}

func writeEscaped(b *bytes.Buffer, s string, attr bool) {
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>' && !attr:
			b.WriteString("&gt;")
		case r == '"' && attr:
			b.WriteString("&quot;")
		case r == '\t' && attr:
			b.WriteString("&#x9;")
		case r == '\n' && attr:
			b.WriteString("&#xA;")
		case r == '\r':
			b.WriteString("&#xD;")
		default:
			b.WriteRune(r)
		}
	}
}
