package dispatch_test

import (
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
)

// TestDecodeIsStrict: the dispatch and node predicates are read strictly:
// an unknown field, a duplicate key, a value of the wrong type, a
// missing required value or an oversize predicate is refused, naming the
// field.
func TestDecodeIsStrict(t *testing.T) {
	t.Parallel()
	d := &dispatch.Dispatch{ID: "d1", Pipeline: dispatch.Ref{Digest: "sha256:aa"}, Fleet: dispatch.Fleet{Engine: "slurm"},
		Jobs: []dispatch.Job{{Name: "a-0", Class: "a", Nonce: "n", PublicKey: "k"}}}
	n := &dispatch.Node{Dispatch: "sha256:bb", Job: "a-0", Nonce: "n", Result: dispatch.ResultPassed}
	subj := []attest.Subject{{Name: "f", Digest: map[string]string{"sha256": strings.Repeat("a", 64)}}}
	dst, err := d.Statement(subj)
	if err != nil {
		t.Fatal(err)
	}
	nst, err := n.Statement(subj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch.Decode(dst); err != nil {
		t.Fatalf("a well-formed dispatch: %v", err)
	}
	if _, err := dispatch.DecodeNode(nst); err != nil {
		t.Fatalf("a well-formed node predicate: %v", err)
	}
	edit := func(st *attest.Statement, old, new string) *attest.Statement {
		c := *st
		c.Predicate = []byte(strings.Replace(string(st.Predicate), old, new, 1))
		if string(c.Predicate) == string(st.Predicate) {
			t.Fatalf("%q not in %s", old, st.Predicate)
		}
		return &c
	}
	big := *dst
	big.Predicate = []byte(`{"id":"` + strings.Repeat("x", attest.DefaultMaxStatementSize) + `"}`)
	for name, c := range map[string]struct {
		st   *attest.Statement
		node bool
		want string
	}{
		"dispatch unknown field":   {edit(dst, `"id":"d1"`, `"id":"d1","extra":1`), false, "extra"},
		"dispatch duplicate key":   {edit(dst, `"id":"d1"`, `"id":"d1","id":"d2"`), false, "appears twice"},
		"dispatch wrong type":      {edit(dst, `"id":"d1"`, `"id":7`), false, "id"},
		"dispatch missing nonce":   {edit(dst, `"nonce":"n"`, `"nonce":""`), false, "jobs[0].nonce"},
		"dispatch oversize":        {&big, false, "bound"},
		"node unknown field":       {edit(nst, `"job":"a-0"`, `"job":"a-0","extra":1`), true, "extra"},
		"node duplicate key":       {edit(nst, `"job":"a-0"`, `"job":"a-0","job":"b-0"`), true, "appears twice"},
		"node wrong type":          {edit(nst, `"simulated":false`, `"simulated":"no"`), true, "simulated"},
		"node result not a result": {edit(nst, `"result":"passed"`, `"result":"maybe"`), true, "result"},
	} {
		var err error
		if c.node {
			_, err = dispatch.DecodeNode(c.st)
		} else {
			_, err = dispatch.Decode(c.st)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", name, err, c.want)
		}
		if c.node {
			// The unsigned report the sign container reads, likewise.
			if _, err := dispatch.ReadNode("report.json", c.st.Predicate); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, as a report: got %v, want an error naming %q", name, err, c.want)
			}
		}
	}
	if r, err := dispatch.ReadNode("report.json", nst.Predicate); err != nil || r.Job != "a-0" {
		t.Errorf("a well-formed report: %+v, %v", r, err)
	}
}
