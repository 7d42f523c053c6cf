package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHostileTextRefused: found by bench/adversarial. A pipeline that is
// not UTF-8, that hides a value behind a YAML tag, or that names a step
// with an id too long for a directory name was accepted; each is refused
// at its position.
func TestHostileTextRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []where
	}{
		{"invalid UTF-8 in a step id", header + "steps:\n  - id: a\xff\xfe\n    run: echo\n", []where{{5, 10, "invalid UTF-8: a pipeline file must be U"}}},
		{"invalid UTF-8 in a command", header + "steps:\n  - id: a\n    run: echo é\xc3\x28\n", []where{{6, 16, "invalid UTF-8: a pipeline file must be U"}}},
		{"!!binary command", header + "steps:\n  - id: a\n    run: !!binary ZWNobyBoaQ==\n", []where{{6, 10, "YAML tag !!binary: tags are not allowed "}}},
		{"!!str tag", header + "steps:\n  - id: !!str a\n    run: echo\n", []where{{5, 9, "YAML tag !!str: tags are not allowed in "}}},
		{"step id of 65 characters", header + "steps:\n  - id: " + strings.Repeat("a", 65) + "\n    run: echo\n", []where{{5, 9, "step id of 65 characters: at most 64"}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, problemsOf(t, tt.src)); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", tt.name, diff)
		}
	}
	if got := problemsOf(t, header+"steps:\n  - id: "+strings.Repeat("a", 64)+"\n    run: echo\n"); got != nil {
		t.Errorf("step id of 64 characters: %v", got)
	}
}

// TestSnippetEscaped: found by bench/adversarial. The source line under a
// problem was printed raw, so a bidi override, an escape or an invalid
// byte in a hostile pipeline reached the terminal; it is escaped, with
// the caret under the escaped column.
func TestSnippetEscaped(t *testing.T) {
	t.Parallel()
	src := header + "steps:\n  - {run: echo, id: \"a\u202eb\"}\n"
	_, err := Parse("p.yaml", []byte(src))
	var probs Problems
	if !errors.As(err, &probs) || len(probs) != 1 {
		t.Fatalf("err = %v", err)
	}
	want := "    5 |   - {run: echo, id: \"a\\u202eb\"}\n      |                     ^"
	if probs[0].Snippet != want {
		t.Errorf("snippet:\n%s\nwant:\n%s", probs[0].Snippet, want)
	}
	if s := snippet([]string{"\x1b[2K\tx: \xffy"}, 1, 6); s != "    1 | \\x1b[2K\tx: \\xffy\n      |        \t^" {
		t.Errorf("snippet = %q", s)
	}
}
