package suite

import (
	"fmt"
	"strings"
	"testing"
)

// TestDuplicateKeysCostPerKey: the duplicate-key scan allocates a few
// objects per container and none per scalar member. It built a JSON
// pointer (and a strings.Replacer) for every key: 2.9 GB of allocations
// and 320 MB peak RSS for a 9 MB results file of 300,000 cases.
func TestDuplicateKeysCostPerKey(t *testing.T) {
	const maxValidAllocsPerCase, maxWalkAllocsPerCase = 4, 100
	var b strings.Builder
	b.WriteString(`{"schema":"https://gpuattest.dev/results/v1","tool":"t","cases":[`)
	const n = 2000
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","status":"passed","metrics":{"a":1,"b":2,"c":3}}`, i)
	}
	b.WriteString("]}")
	data := []byte(b.String())
	if err := checkDuplicateKeys("r.json", data); err != nil {
		t.Fatal(err)
	}
	// Allocations counted by the runtime (testing.AllocsPerRun, not
	// timed), per case of {"name","status","metrics":{a,b,c}}. A valid
	// document takes only jsonstrict's scan: 3.0 per case when measured
	// (Go 1.26), none per scalar member.
	valid := testing.AllocsPerRun(3, func() { _ = checkDuplicateKeys("r.json", data) }) / n
	t.Logf("a valid document of %d cases: %.1f allocations per case", n, valid)
	if valid > maxValidAllocsPerCase {
		t.Errorf("a valid document of %d cases: %.1f allocations per case, want at most %d", n, valid, maxValidAllocsPerCase)
	}
	// A repeat in the last case is found by walking the whole document
	// again with the decoder, for the repeat's JSON pointer: its tokens
	// and two small frames per case, 83 per case when measured. A JSON
	// pointer and a strings.Replacer per key cost far more (2.9 GB for a
	// 9 MB file).
	last := []byte(strings.Replace(b.String(), `"c":3}}]}`, `"c":3,"c":4}}]}`, 1))
	walked := testing.AllocsPerRun(3, func() { _ = checkDuplicateKeys("r.json", last) }) / n
	t.Logf("a repeat in the last of %d cases: %.1f allocations per case", n, walked)
	if walked > maxWalkAllocsPerCase {
		t.Errorf("a repeat in the last of %d cases: %.1f allocations per case, want at most %d", n, walked, maxWalkAllocsPerCase)
	}
	dup := strings.Replace(b.String(), `"status":"passed"`, `"status":"failed","status":"passed"`, 1)
	err := checkDuplicateKeys("r.json", []byte(dup))
	if err == nil || !strings.Contains(err.Error(), `r.json:1:`) || !strings.Contains(err.Error(), `duplicate key "status" in /cases/0`) {
		t.Errorf("duplicate: err = %v", err)
	}
	dup = strings.Replace(b.String(), `"c":3}}]}`, `"c":3,"c":4}}]}`, 1)
	if err := checkDuplicateKeys("r.json", []byte(dup)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`in /cases/%d/metrics`, n-1)) {
		t.Errorf("duplicate in a nested object: err = %v", err)
	}
}

// TestSamplesSchemaStillChecked: the schema no longer walks numeric
// samples (skipNumericSamples), so a non-number sample must still be
// refused with its pointer, and a non-positive one by the duration check.
func TestSamplesSchemaStillChecked(t *testing.T) {
	head := `{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed","samples_ns":`
	for _, tt := range []struct{ samples, want string }{
		{`[1, "2", 3]`, `/cases/0/samples_ns/1`},
		{`[1, 2, -3]`, `/cases/0/samples_ns/2: -3 is not a positive duration`},
		{`"fast"`, `/cases/0/samples_ns`},
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

func TestBlankSamples(t *testing.T) {
	in := `{"cases":[{"name":"a","samples_ns":[1, 2.5e3,-4]},{"samples_ns":[NaN]},{"samples_ns":[1,"x"]},{"samples_ns" : [7]}]}`
	want := `{"cases":[{"name":"a","samples_ns":[           ]},{"samples_ns":[NaN]},{"samples_ns":[1,"x"]},{"samples_ns" : [7]}]}`
	if got := string(blankSamples([]byte(in))); got != want {
		t.Errorf("blankSamples:\n got %s\nwant %s", got, want)
	}
	if b := []byte(`{"cases":[]}`); &blankSamples(b)[0] != &b[0] {
		t.Error("a file without samples was copied")
	}
	// A syntax error inside blanked samples is found by the typed decode,
	// at its place in the file.
	head := `{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed","samples_ns":`
	if _, err := parseResultsJSON("r.json", []byte(head+"[1,,2]}]}")); err == nil || !strings.Contains(err.Error(), "r.json:1:") {
		t.Errorf("syntax error in samples: err = %v", err)
	}
}
