package pipeline

import (
	"fmt"
	"strings"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/textsafe"
)

// Problem is one thing wrong with a pipeline file, with its position and
// field path: the one problem type every gpuattest document reader uses.
type Problem = problem.Problem

// Problems is every problem found in one pass; it is the error Load and
// Parse return for invalid input.
type Problems = problem.List

// Issue is one problem a step check (such as [CheckCUDABuild]) found, by
// field path (steps[2].flags[0]) and without a position: Load places it
// at the field's position, and an executor that refuses a step reports it
// as it is ("path: message" and a hint line).
type Issue = problem.Problem

// Issues is every issue a check found; it is an error.
type Issues = problem.List

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
