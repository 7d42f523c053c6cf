package suite

import (
	"fmt"
	"strings"
	"testing"
)

// TestResultsStrictRead: a results file is read the one way every
// document is (jsonstrict.Decode, then Validate): a repeated key, a
// mistyped sample and a non-positive one are refused with line:col and
// field path, and the read costs a bounded number of allocations per
// case (a JSON pointer and a strings.Replacer per key once cost 2.9 GB
// for a 9 MB file of 300,000 cases).
func TestResultsStrictRead(t *testing.T) {
	const maxAllocsPerCase = 30
	var b strings.Builder
	b.WriteString(`{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[`)
	const n = 2000
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","status":"passed","samples_ns":[1,2,3],"config":{"a":"1","b":"2","c":"3"}}`, i)
	}
	b.WriteString("]}")
	data := []byte(b.String())
	if _, err := parseResultsJSON("r.json", data); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(3, func() { _, _ = parseResultsJSON("r.json", data) }) / n
	t.Logf("a valid document of %d cases: %.1f allocations per case", n, allocs)
	if allocs > maxAllocsPerCase {
		t.Errorf("a valid document of %d cases: %.1f allocations per case, want at most %d", n, allocs, maxAllocsPerCase)
	}
	for _, tt := range []struct{ name, doc, want string }{
		{"repeated key", strings.Replace(b.String(), `"status":"passed"`, `"status":"failed","status":"passed"`, 1), `r.json:1:`},
		{"repeated key's path", strings.Replace(b.String(), `"status":"passed"`, `"status":"failed","status":"passed"`, 1), `cases[0]: key "status" appears twice`},
		{"nested repeat", strings.Replace(b.String(), `"c":"3"}}]}`, `"c":"3","c":"4"}}]}`, 1), fmt.Sprintf(`cases[%d].config: key "c" appears twice`, n-1)},
	} {
		_, err := parseResultsJSON("r.json", []byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestSamplesChecked: a non-number sample is refused by the shape check
// and a non-positive one by Validate, each with its field path.
func TestSamplesChecked(t *testing.T) {
	head := `{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed","samples_ns":`
	for _, tt := range []struct{ samples, want string }{
		{`[1, "2", 3]`, `r.json:1:129: cases[0].samples_ns[1]: expected a number, got a string`},
		{`[1, 2, -3]`, `r.json: cases[0].samples_ns[2]: -3 is not a positive duration`},
		{`"fast"`, `cases[0].samples_ns: expected an array, got a string`},
	} {
		_, err := parseResultsJSON("r.json", []byte(head+tt.samples+`}]}`))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("samples %s: err = %v, want %q", tt.samples, err, tt.want)
		}
	}
	r, err := parseResultsJSON("r.json", []byte(head+`[1.5, 2, 3e2]}]}`))
	if err != nil || len(r.Cases[0].SamplesNS) != 3 || r.Cases[0].SamplesNS[2] != 300 {
		t.Errorf("numeric samples: %+v, %v", r, err)
	}
}
