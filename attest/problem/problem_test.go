package problem

import (
	"encoding/json"
	"testing"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		p    Problem
		want string
	}{
		{"position and snippet", Problem{File: "p.yaml", Line: 3, Col: 5, Path: "steps[0].run", Message: "bad", Snippet: "    3 | x\n      | ^", Hint: "fix it"},
			"p.yaml:3:5: bad\n    3 | x\n      | ^\n    hint: fix it"},
		{"position, no snippet", Problem{File: "p.yaml", Line: 3, Col: 5, Path: "rules[0].name", Message: "duplicate rule name"},
			"p.yaml:3:5: rules[0].name: duplicate rule name"},
		{"field path only", Problem{File: "gpuattest.lock", Path: "images[1].platform", Message: "missing", Hint: "regenerate it"},
			"gpuattest.lock: images[1].platform: missing\nhint: regenerate it"},
		{"no file", Problem{Path: "targets", Message: "empty"}, "targets: empty"},
		{"message only", Problem{Message: "empty"}, "empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.String(); got != tt.want {
				t.Errorf("String() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	var l List
	if l.Err() != nil {
		t.Fatal("an empty list is not an error")
	}
	l = append(l, Problem{File: "f", Line: 9, Col: 1, Message: "b"}, Problem{File: "f", Line: 2, Col: 7, Message: "a"})
	l.Add("x.y", "", "no position %d", 1)
	l = l.InFile("g")
	got := l.Sorted().Error()
	want := "g: x.y: no position 1\nf:2:7: a\nf:9:1: b"
	if got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	b, err := json.Marshal(Problem{Path: "targets", Message: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"path":"targets","message":"empty"}` {
		t.Errorf("JSON = %s", b)
	}
}
