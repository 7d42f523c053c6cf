package jsonpos

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestLineCol(t *testing.T) {
	data := []byte("{\n  \"a\": 1,\n  \"b\": x\n}")
	tests := []struct {
		name      string
		off       int64
		line, col int
	}{
		{"start", 0, 1, 1},
		{"end of first line", 1, 1, 2},
		{"second line", 4, 2, 3},
		{"third line", 19, 3, 8},
		{"negative", -5, 1, 1},
		{"past the end", 1000, 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if l, c := LineCol(data, tt.off); l != tt.line || c != tt.col {
				t.Errorf("LineCol(%d) = %d:%d, want %d:%d", tt.off, l, c, tt.line, tt.col)
			}
		})
	}
}

func TestOfError(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		into      any
		line, col int
		ok        bool
	}{
		{"syntax", "{\n  \"a\": x\n}", new(map[string]int), 2, 8, true},
		{"type", "{\n  \"a\": \"s\"\n}", new(struct{ A int }), 2, 10, true},
		{"syntax at the first byte", "x", new(any), 1, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := json.Unmarshal([]byte(tt.data), tt.into)
			if err == nil {
				t.Fatal("no error")
			}
			l, c, ok := OfError([]byte(tt.data), err)
			if l != tt.line || c != tt.col || ok != tt.ok {
				t.Errorf("OfError(%v) = %d:%d %v, want %d:%d %v", err, l, c, ok, tt.line, tt.col, tt.ok)
			}
		})
	}
	if _, _, ok := OfError(nil, errors.New("no offset")); ok {
		t.Error("an error without an offset has a position")
	}
}
