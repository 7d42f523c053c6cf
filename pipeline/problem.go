package pipeline

import (
	"fmt"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"sort"
	"strings"
)

// Problem is one thing wrong with a pipeline file, with its position.
type Problem struct {
	// File is the path of the pipeline file.
	File string `json:"file"`
	// Line and Col are 1-based; zero when the problem has no position.
	Line int `json:"line"`
	Col  int `json:"col"`
	// Path is the field path, e.g. steps[2].needs[0].
	Path string `json:"path,omitempty"`
	// Message says what is wrong and what was expected.
	Message string `json:"message"`
	// Hint suggests a fix; may be empty.
	Hint string `json:"hint,omitempty"`
	// Snippet is the offending source line with a caret under Col.
	Snippet string `json:"snippet,omitempty"`
}

// String renders the problem as file:line:col: message, then the snippet
// and the hint.
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: %s", p.File, p.Line, p.Col, p.Message)
	default:
		fmt.Fprintf(&b, "%s: %s", p.File, p.Message)
	}
	if p.Snippet != "" {
		b.WriteString("\n")
		b.WriteString(p.Snippet)
	}
	if p.Hint != "" {
		b.WriteString("\n    hint: ")
		b.WriteString(p.Hint)
	}
	return b.String()
}

// Problems is every problem found in one pass; it is the error Load and
// Parse return for invalid input.
type Problems []Problem

// Error renders every problem, one block each.
func (ps Problems) Error() string { return blocks(ps) }

// Issue is one problem a step check (such as [CheckCUDABuild]) found, by
// field path (steps[2].flags[0]) and without a position: Load reports it
// as a Problem at the field's position, and an executor that refuses a
// step reports it as it is.
type Issue struct {
	// Path is the field path, e.g. steps[0].flags[2].
	Path string `json:"path"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Hint suggests a fix; may be empty.
	Hint string `json:"hint,omitempty"`
}

// String renders the issue as "path: message" plus a hint line.
func (i Issue) String() string {
	s := i.Path + ": " + i.Message
	if i.Hint != "" {
		s += "\nhint: " + i.Hint
	}
	return s
}

// Issues is every issue a check found; it is an error.
type Issues []Issue

// Error renders every issue, one block each.
func (is Issues) Error() string { return blocks(is) }

// blocks renders each of xs, one after the other on lines of their own.
func blocks[T fmt.Stringer](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	return strings.Join(parts, "\n")
}

func (ps Problems) sorted() Problems {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Line != ps[j].Line {
			return ps[i].Line < ps[j].Line
		}
		return ps[i].Col < ps[j].Col
	})
	return ps
}

// snippet renders line n of src with a caret under column col. The line
// is shown with textsafe.Lines (a raw escape, bidi override or invalid
// byte of a hostile file would act on the terminal), and the caret is
// placed under the escaped text.
func snippet(lines []string, n, col int) string {
	if n < 1 || n > len(lines) {
		return ""
	}
	text := strings.TrimRight(lines[n-1], "\r")
	gutter := fmt.Sprintf("%5d | ", n)
	pad := strings.Repeat(" ", len(gutter)-2) + "| "
	caret := ""
	if col >= 1 {
		prefix := text
		k := 0
		for i := range text {
			if k == col-1 {
				prefix = text[:i]
				break
			}
			k++
		}
		// Keep tabs so the caret lines up under them.
		for _, r := range textsafe.Lines(prefix) {
			if r == '\t' {
				caret += "\t"
			} else {
				caret += " "
			}
		}
		caret += "^"
	}
	return gutter + textsafe.Lines(text) + "\n" + pad + caret
}
