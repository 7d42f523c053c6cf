package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line returns s with every character that could act on a terminal, line
// breaks and tabs included, shown as an escape, for one line or table
// cell.
func Line(s string) string { return escape(s, false) }

// Lines is Line for a message of several lines: it keeps newlines and
// tabs and escapes the rest (a carriage return included).
func Lines(s string) string { return escape(s, true) }

// Linef formats like fmt.Sprintf, then applies Line.
func Linef(format string, args ...any) string { return Line(fmt.Sprintf(format, args...)) }

func escape(s string, keepLines bool) string {
	if safe(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r) && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safe reports whether s needs no escape.
func safe(s string, keepLines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f, keepLines && (c == '\n' || c == '\t'):
			i++
			continue
		case c < utf8.RuneSelf:
			return false
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || unsafe(r) {
			return false
		}
		i += n
	}
	return true
}

// unsafe reports whether r may act on a terminal or hide text: control
// and format characters and line or paragraph separators.
func unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
