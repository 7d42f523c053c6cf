package textsafe_test

import (
	"testing"

	"github.com/gpuattest/gpuattest/internal/textsafe"
)

func TestLine(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, line, lines string }{
		{"plain text, é → ✓", "plain text, é → ✓", "plain text, é → ✓"},
		{`back\slash "quoted"`, `back\slash "quoted"`, `back\slash "quoted"`},
		{"\x1b[2K\x1b[1AFAIL", `\x1b[2K\x1b[1AFAIL`, `\x1b[2K\x1b[1AFAIL`},
		{"a\nb\tc\rd", `a\nb\tc\rd`, "a\nb\tc\\rd"},
		{"bell\a del\x7f", `bell\x07 del\x7f`, `bell\x07 del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`, `c1 \u009b31m`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`, `bidi \u202egnp.exe`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`, `zero\u200bwidth\ufeff`},
		{"sep\u2028x", `sep\u2028x`, `sep\u2028x`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`, `bad \xff\xfe utf8`},
		{"tag \U000E0041", `tag \U000e0041`, `tag \U000e0041`},
		{"real \ufffd replacement", "real \ufffd replacement", "real \ufffd replacement"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := textsafe.Line(tt.in); got != tt.line {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
		}
		if got := textsafe.Lines(tt.in); got != tt.lines {
			t.Errorf("Lines(%q) = %q, want %q", tt.in, got, tt.lines)
		}
	}
	if got := textsafe.Linef("%s: %d", "a\x1bb", 3); got != `a\x1bb: 3` {
		t.Errorf("Linef = %q", got)
	}
}

// FuzzLine: the output of Line never holds a byte a terminal acts on.
func FuzzLine(f *testing.F) {
	f.Add("\x1b]0;title\x07")
	f.Add("\u202e\xff\u0085")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []byte(textsafe.Line(s)) {
			if c < 0x20 || c == 0x7f {
				t.Fatalf("Line(%q) holds byte %#x", s, c)
			}
		}
		for _, r := range textsafe.Line(s) {
			if r >= 0x80 && r <= 0x9f || r == '\u202e' || r == '\u2028' {
				t.Fatalf("Line(%q) holds %U", s, r)
			}
		}
	})
}
