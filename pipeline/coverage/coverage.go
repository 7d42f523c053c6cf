package coverage

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// Formats a report can have.
const (
	FormatLcov      = "lcov"
	FormatCobertura = "cobertura"
	FormatGo        = "go"
)

// Bounds on a coverage report.
const (
	// MaxBytes is the largest report read.
	MaxBytes = 64 << 20
	// MaxDepth is the deepest XML element nesting read (Cobertura
	// nests five deep: coverage, packages, package, classes, class,
	// lines, line, conditions).
	MaxDepth = 32
	// maxLine is the longest line of a text report.
	maxLine = 1 << 20
)

// Totals are a report's totals.
type Totals struct {
	// Format is FormatLcov, FormatCobertura or FormatGo.
	Format string `json:"format"`
	// LinesFound and LinesHit count instrumented and executed lines
	// (statements, for a Go coverprofile).
	LinesFound int64 `json:"lines_found"`
	LinesHit   int64 `json:"lines_hit"`
	// Lines is LinesHit / LinesFound (0 when nothing was found).
	Lines float64 `json:"lines"`
	// BranchesFound and BranchesHit count branches, where the format
	// gives them; Branches is their ratio, nil without branch data.
	BranchesFound int64    `json:"branches_found,omitempty"`
	BranchesHit   int64    `json:"branches_hit,omitempty"`
	Branches      *float64 `json:"branches,omitempty"`
}

// Error is a problem at a position of a report.
type Error struct {
	// File is the report as named; Line and Col are 1-based (Col 0 when
	// unknown, Line 0 for the whole file).
	File      string
	Line, Col int
	// Msg says what is wrong and what was expected.
	Msg string
}

func (e *Error) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Col == 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// ReadFile reads the report at path (at most MaxBytes) and returns its
// totals; name is how errors name it.
func ReadFile(path, name string) (*Totals, error) {
	// limits.Open checks the opened file and never waits on a FIFO a
	// hostile step left in the report's place.
	f, err := limits.Open(path, "coverage report")
	if errors.Is(err, limits.ErrNotRegular) {
		return nil, &Error{File: name, Msg: "not a regular file"}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("larger than %d bytes\nhint: a coverage report is read whole; merge or trim it", MaxBytes)}
	}
	return Parse(name, data)
}

// Parse reads a report by its content: a Go coverprofile starts with
// "mode:", Cobertura is XML, anything else is read as lcov.
func Parse(name string, data []byte) (*Totals, error) {
	head := bytes.TrimLeft(data[:min(len(data), 512)], " \t\r\n\ufeff")
	var t *Totals
	var err error
	switch {
	case bytes.HasPrefix(head, []byte("mode:")):
		t, err = parseGo(name, data)
	case bytes.HasPrefix(head, []byte("<")):
		t, err = parseCobertura(name, data)
	default:
		t, err = parseLcov(name, data)
	}
	if err != nil {
		return nil, err
	}
	t.finish()
	return t, nil
}

func (t *Totals) finish() {
	if t.LinesFound > 0 {
		t.Lines = float64(t.LinesHit) / float64(t.LinesFound)
	}
	if t.BranchesFound > 0 && t.Branches == nil {
		b := float64(t.BranchesHit) / float64(t.BranchesFound)
		t.Branches = &b
	}
}

// lines calls f with each line of data and its number, bounding lines.
func lines(name string, data []byte, f func(n int, line string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		if err := f(n, strings.TrimRight(sc.Text(), "\r")); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return &Error{File: name, Line: n + 1, Msg: fmt.Sprintf("a line longer than %d bytes", maxLine)}
	}
	return nil
}

// parseLcov sums the records of an lcov tracefile: LF/LH and BRF/BRH
// where a record gives them, else its DA and BRDA lines.
func parseLcov(name string, data []byte) (*Totals, error) {
	t := &Totals{Format: FormatLcov}
	var rec struct {
		lf, lh, brf, brh, da, dah, brda, brdah int64
		hasLF, hasBRF, open                    bool
	}
	records := 0
	num := func(n int, s string) (int64, error) {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || v < 0 {
			return 0, &Error{File: name, Line: n, Msg: fmt.Sprintf("%q: expected a count", s)}
		}
		return v, nil
	}
	err := lines(name, data, func(n int, line string) error {
		key, val, _ := strings.Cut(line, ":")
		var err error
		var v int64
		switch key {
		case "SF":
			rec.open = true
		case "LF", "LH", "BRF", "BRH":
			if v, err = num(n, val); err != nil {
				return err
			}
			switch key {
			case "LF":
				rec.lf, rec.hasLF = v, true
			case "LH":
				rec.lh = v
			case "BRF":
				rec.brf, rec.hasBRF = v, true
			case "BRH":
				rec.brh = v
			}
		case "DA":
			f := strings.Split(val, ",")
			if len(f) < 2 {
				return &Error{File: name, Line: n, Msg: fmt.Sprintf("DA:%s: expected DA:<line>,<count>", val)}
			}
			if v, err = num(n, f[1]); err != nil {
				return err
			}
			rec.da++
			if v > 0 {
				rec.dah++
			}
		case "BRDA":
			f := strings.Split(val, ",")
			if len(f) != 4 {
				return &Error{File: name, Line: n, Msg: fmt.Sprintf("BRDA:%s: expected BRDA:<line>,<block>,<branch>,<count or ->", val)}
			}
			rec.brda++
			if c := strings.TrimSpace(f[3]); c != "-" && c != "0" {
				if _, err := num(n, c); err != nil {
					return err
				}
				rec.brdah++
			}
		case "end_of_record":
			if !rec.hasLF {
				rec.lf, rec.lh = rec.da, rec.dah
			}
			if !rec.hasBRF {
				rec.brf, rec.brh = rec.brda, rec.brdah
			}
			if rec.lh > rec.lf || rec.brh > rec.brf {
				return &Error{File: name, Line: n, Msg: "the record counts more lines or branches hit than found"}
			}
			t.LinesFound += rec.lf
			t.LinesHit += rec.lh
			t.BranchesFound += rec.brf
			t.BranchesHit += rec.brh
			records++
			rec = struct {
				lf, lh, brf, brh, da, dah, brda, brdah int64
				hasLF, hasBRF, open                    bool
			}{}
		case "TN", "FN", "FNDA", "FNF", "FNH", "VER", "":
		default:
			if !strings.HasPrefix(key, "#") {
				return &Error{File: name, Line: n, Col: 1, Msg: fmt.Sprintf("%q: not an lcov line (expected SF:, DA:, LF:, LH:, BRDA:, end_of_record, ...)\nhint: coverage files are lcov .info, Cobertura XML or a Go coverprofile", truncate(line))}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rec.open {
		return nil, &Error{File: name, Msg: "the last record has no end_of_record: truncated?"}
	}
	if records == 0 {
		return nil, &Error{File: name, Msg: "no lcov records (SF: ... end_of_record)"}
	}
	return t, nil
}

// parseGo reads a Go coverprofile: statements by block, a block
// counted once however many times it is listed (go test -coverpkg
// lists a package's blocks once per test binary), covered when any
// listing counts it.
func parseGo(name string, data []byte) (*Totals, error) {
	t := &Totals{Format: FormatGo}
	type block struct {
		stmts int64
		hit   bool
	}
	blocks := map[string]*block{}
	err := lines(name, data, func(n int, line string) error {
		if n == 1 {
			mode := strings.TrimSpace(strings.TrimPrefix(line, "mode:"))
			if mode != "set" && mode != "count" && mode != "atomic" {
				return &Error{File: name, Line: 1, Col: 7, Msg: fmt.Sprintf("mode %q: expected set, count or atomic", mode)}
			}
			return nil
		}
		if line == "" {
			return nil
		}
		f := strings.Fields(line)
		i := strings.LastIndex(line, ":")
		if len(f) < 3 || i < 0 {
			return &Error{File: name, Line: n, Msg: fmt.Sprintf("%q: expected <file>:<line>.<col>,<line>.<col> <statements> <count>", truncate(line))}
		}
		stmts, err1 := strconv.ParseInt(f[len(f)-2], 10, 64)
		count, err2 := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err1 != nil || err2 != nil || stmts < 0 || count < 0 {
			return &Error{File: name, Line: n, Msg: fmt.Sprintf("%q: expected counts of statements and executions", truncate(line))}
		}
		key := strings.Join(f[:len(f)-2], " ")
		b := blocks[key]
		if b == nil {
			b = &block{stmts: stmts}
			blocks[key] = b
		}
		b.hit = b.hit || count > 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		t.LinesFound += b.stmts
		if b.hit {
			t.LinesHit += b.stmts
		}
	}
	return t, nil
}

// parseCobertura reads the totals of a Cobertura report's root
// element: lines-valid and lines-covered (else its <line> elements'
// hits), branches-valid and branches-covered where given.
func parseCobertura(name string, data []byte) (*Totals, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	t := &Totals{Format: FormatCobertura}
	pos := func(msg string) error {
		l, c := d.InputPos()
		return &Error{File: name, Line: l, Col: c, Msg: msg}
	}
	depth, root := 0, false
	var counted, countedHit int64
	haveLines := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return nil, &Error{File: name, Line: se.Line, Msg: "malformed XML: " + se.Msg}
			}
			return nil, pos("malformed XML: " + err.Error())
		}
		switch tok := tok.(type) {
		case xml.Directive:
			return nil, pos("a document type declaration (<!DOCTYPE ...>): refused, it could declare entities\nhint: Cobertura reports need none; gcovr and pytest-cov write a DOCTYPE without an internal subset only when asked")
		case xml.StartElement:
			depth++
			if depth > MaxDepth {
				return nil, pos(fmt.Sprintf("elements nested deeper than %d", MaxDepth))
			}
			if depth == 1 {
				if tok.Name.Local != "coverage" {
					return nil, pos(fmt.Sprintf("root element <%s>: expected <coverage> (Cobertura)", tok.Name.Local))
				}
				root = true
				var err error
				if haveLines, err = coberturaRoot(t, tok.Attr); err != nil {
					return nil, pos(err.Error())
				}
			}
			if tok.Name.Local == "line" && !haveLines {
				for _, a := range tok.Attr {
					if a.Name.Local == "hits" {
						h, err := strconv.ParseInt(a.Value, 10, 64)
						if err != nil || h < 0 {
							return nil, pos(fmt.Sprintf("hits=%q: expected a count", a.Value))
						}
						counted++
						if h > 0 {
							countedHit++
						}
					}
				}
			}
		case xml.EndElement:
			depth--
		}
	}
	if !root {
		return nil, &Error{File: name, Msg: "no <coverage> element: not a Cobertura report"}
	}
	if !haveLines {
		t.LinesFound, t.LinesHit = counted, countedHit
	}
	if t.LinesHit > t.LinesFound || t.BranchesHit > t.BranchesFound {
		return nil, &Error{File: name, Line: 1, Msg: "more lines or branches covered than valid"}
	}
	return t, nil
}

// coberturaRoot reads the root's totals; haveLines says it gave
// lines-valid and lines-covered.
func coberturaRoot(t *Totals, attrs []xml.Attr) (haveLines bool, err error) {
	got := map[string]int64{}
	for _, a := range attrs {
		switch a.Name.Local {
		case "lines-valid", "lines-covered", "branches-valid", "branches-covered":
			v, err := strconv.ParseInt(a.Value, 10, 64)
			if err != nil || v < 0 {
				return false, fmt.Errorf("%s=%q: expected a count", a.Name.Local, a.Value)
			}
			got[a.Name.Local] = v
		}
	}
	_, lv := got["lines-valid"]
	_, lc := got["lines-covered"]
	if lv && lc {
		t.LinesFound, t.LinesHit, haveLines = got["lines-valid"], got["lines-covered"], true
	}
	if _, ok := got["branches-valid"]; ok {
		t.BranchesFound, t.BranchesHit = got["branches-valid"], got["branches-covered"]
	}
	return haveLines, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
