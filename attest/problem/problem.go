// Package problem is the one way gpuattest reports what is wrong with a
// document it reads (a pipeline, a lock, a policy, a results file, a
// predicate): every reader collects a List of Problems, each placed by
// file, line and column where the reader knows them and by field path.
//
// It is public so that a program linking attest/ can take the problems
// apart: the Validate methods of attest/ return a List, and the readers
// (attest/policy's Parse, attest/hardware's Decode, attest/dispatch's
// Decode and ReadNode, ...) return one as their error, which errors.As
// finds:
//
//	var probs problem.List
//	if errors.As(err, &probs) {
//		for _, p := range probs {
//			fmt.Println(p.Path, p.Message, p.Hint)
//		}
//	}
//
// The package imports nothing else of gpuattest, so every package of the
// module, internal/ included, may use it.
package problem

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a document.
type Problem struct {
	// File names the document; empty when the caller names it.
	File string `json:"file,omitempty"`
	// Line and Col are 1-based; zero when the problem has no position.
	Line int `json:"line,omitempty"`
	Col  int `json:"col,omitempty"`
	// Path is the field path, e.g. steps[2].needs[0].
	Path string `json:"path,omitempty"`
	// Message says what is wrong and what was expected.
	Message string `json:"message"`
	// Hint suggests a fix; may be empty.
	Hint string `json:"hint,omitempty"`
	// Snippet is the offending source line with a caret under Col.
	Snippet string `json:"snippet,omitempty"`
}

// String renders the problem as "file:line:col: path: message", then the
// snippet and the hint on lines of their own. The path is left out when a
// snippet shows the place; the file and the position when unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", p.Line, p.Col)
		}
		b.WriteString(": ")
	}
	if p.Path != "" && p.Snippet == "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Snippet != "" {
		b.WriteString("\n")
		b.WriteString(p.Snippet)
	}
	if p.Hint != "" {
		if p.Snippet != "" {
			b.WriteString("\n    hint: ")
		} else {
			b.WriteString("\nhint: ")
		}
		b.WriteString(p.Hint)
	}
	return b.String()
}

// Error makes a single Problem usable as an error.
func (p Problem) Error() string { return p.String() }

// List is every problem a reader found in one pass; it is the error the
// readers return for invalid input.
type List []Problem

// Error renders every problem, one block each.
func (l List) Error() string {
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = p.String()
	}
	return strings.Join(parts, "\n")
}

// Err returns l as an error, or nil when it is empty.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Sorted returns l ordered by position (stable: problems without one, or
// at the same place, keep their order).
func (l List) Sorted() List {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Col < l[j].Col
	})
	return l
}

// Add appends a problem at path with no position.
func (l *List) Add(path, hint, format string, args ...any) {
	*l = append(*l, Problem{Path: path, Message: fmt.Sprintf(format, args...), Hint: hint})
}

// InFile returns l with File set to name on every problem that has none.
func (l List) InFile(name string) List {
	for i := range l {
		if l[i].File == "" {
			l[i].File = name
		}
	}
	return l
}
