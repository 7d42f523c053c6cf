package suite

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// junitSuite is a <testsuite>; suites may nest (some tools do that).
type junitSuite struct {
	Name   string       `xml:"name,attr"`
	Cases  []junitCase  `xml:"testcase"`
	Suites []junitSuite `xml:"testsuite"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr,omitempty"`
	Status    string        `xml:"status,attr,omitempty"` // ctest: run, fail, notrun, disabled
	Failures  []junitResult `xml:"failure"`
	Errors    []junitResult `xml:"error"`
	Skipped   []junitResult `xml:"skipped"`
}

type junitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// parseJUnit reads JUnit XML as written by pytest (--junitxml), ctest
// (--output-junit) and gotestsum (--junitfile): a <testsuites> or
// <testsuite> root holding <testcase> elements with optional <failure>,
// <error> and <skipped> children.
func parseJUnit(path string, b []byte) (*Results, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	var root xml.StartElement
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no XML element found\nhint: expected JUnit XML with a <testsuites> or <testsuite> root", path)
		}
		if err != nil {
			return nil, xmlError(path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			root = se
			break
		}
	}
	var suites []junitSuite
	switch root.Name.Local {
	case "testsuites":
		var all struct {
			Suites []junitSuite `xml:"testsuite"`
		}
		if err := dec.DecodeElement(&all, &root); err != nil {
			return nil, xmlError(path, err)
		}
		suites = all.Suites
	case "testsuite":
		var s junitSuite
		if err := dec.DecodeElement(&s, &root); err != nil {
			return nil, xmlError(path, err)
		}
		suites = []junitSuite{s}
	default:
		line, col := dec.InputPos()
		return nil, fmt.Errorf("%s:%d:%d: root element <%s>: expected <testsuites> or <testsuite>\nhint: JUnit XML from pytest --junitxml, ctest --output-junit or gotestsum --junitfile", path, line, col, root.Name.Local)
	}
	// One root only: a second one would be read by some tools and not by
	// others, and could hide the failures of the first.
	for {
		line, col := dec.InputPos()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, xmlError(path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			return nil, fmt.Errorf("%s:%d:%d: second root element <%s> after </%s>: malformed results\nhint: a JUnit file has exactly one <testsuites> or <testsuite> root", path, line, col, se.Name.Local, root.Name.Local)
		}
	}
	r := &Results{Schema: ResultsSchemaID, Tool: "junit", Format: FormatJUnit}
	var walk func(s junitSuite)
	walk = func(s junitSuite) {
		for _, c := range s.Cases {
			r.Cases = append(r.Cases, junitToCase(s.Name, c))
		}
		for _, sub := range s.Suites {
			walk(sub)
		}
	}
	for _, s := range suites {
		walk(s)
	}
	for i, c := range r.Cases {
		if c.Name == "" {
			return nil, fmt.Errorf("%s: testcase %d has no name attribute", path, i+1)
		}
	}
	return r, nil
}

func junitToCase(suite string, c junitCase) Case {
	name := c.Name
	if name != "" && c.Classname != "" && !strings.HasPrefix(name, c.Classname) {
		name = c.Classname + "." + name
	}
	k := Case{Name: name, Status: StatusPassed}
	msg := func(rs []junitResult) string {
		for _, x := range rs {
			if m := strings.TrimSpace(x.Message); m != "" {
				return m
			}
			if t := strings.TrimSpace(x.Text); t != "" {
				first, _, _ := strings.Cut(t, "\n")
				return first
			}
		}
		return ""
	}
	switch {
	case len(c.Errors) > 0:
		k.Status, k.Message = StatusError, msg(c.Errors)
	case len(c.Failures) > 0:
		k.Status, k.Message = StatusFailed, msg(c.Failures)
	case c.Status == "fail":
		k.Status, k.Message = StatusFailed, "ctest status fail"
	case len(c.Skipped) > 0:
		k.Status, k.Message = StatusSkipped, msg(c.Skipped)
	case c.Status == "notrun" || c.Status == "disabled":
		k.Status, k.Message = StatusSkipped, "ctest status "+c.Status
	}
	if k.Status != StatusPassed && k.Message == "" {
		k.Message = k.Status
	}
	return k
}

func xmlError(path string, err error) error {
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s:%d: %s\nhint: expected JUnit XML", path, se.Line, se.Msg)
	}
	return fmt.Errorf("%s: %v\nhint: expected JUnit XML", path, err)
}

// JUnitCase is one test case of a JUnit report that gpuattest writes.
type JUnitCase struct {
	// Name and Classname identify the case.
	Name, Classname string
	// Seconds is the case's time.
	Seconds float64
	// Status is passed, failed, skipped or error.
	Status string
	// Message says why, when not passed; Output is the failure's body.
	Message, Output string
}

// WriteJUnit writes cases as one JUnit <testsuite> named name inside a
// <testsuites> root, the form CI systems ingest.
func WriteJUnit(w io.Writer, name string, cases []JUnitCase) error {
	type result struct {
		Message string `xml:"message,attr,omitempty"`
		Text    string `xml:",chardata"`
	}
	type tc struct {
		Name      string  `xml:"name,attr"`
		Classname string  `xml:"classname,attr"`
		Time      string  `xml:"time,attr"`
		Failure   *result `xml:"failure"`
		Error     *result `xml:"error"`
		Skipped   *result `xml:"skipped"`
	}
	type ts struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Time     string `xml:"time,attr"`
		Cases    []tc   `xml:"testcase"`
	}
	type root struct {
		XMLName xml.Name `xml:"testsuites"`
		Suites  []ts     `xml:"testsuite"`
	}
	s := ts{Name: name, Tests: len(cases)}
	var total float64
	for _, c := range cases {
		t := tc{Name: c.Name, Classname: c.Classname, Time: fmt.Sprintf("%.6f", c.Seconds)}
		total += c.Seconds
		r := &result{Message: c.Message, Text: c.Output}
		switch c.Status {
		case StatusFailed:
			t.Failure = r
			s.Failures++
		case StatusError:
			t.Error = r
			s.Errors++
		case StatusSkipped:
			t.Skipped = r
			s.Skipped++
		}
		s.Cases = append(s.Cases, t)
	}
	s.Time = fmt.Sprintf("%.6f", total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root{Suites: []ts{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
