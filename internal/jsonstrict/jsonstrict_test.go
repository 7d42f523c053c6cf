package jsonstrict_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/jsonstrict"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	many := "{" + strings.Repeat(`"k":1,`, 0)
	for i := range 40 {
		many += `"k` + strings.Repeat("x", i) + `":1,`
	}
	tests := []struct {
		name, doc string
		wantErr   string // "" means valid
	}{
		{name: "object", doc: `{"a": [1, -2.5e+3, "x\u00e9\n", true, false, null, {}], "b": {"c": []}}`},
		{name: "scalar", doc: ` 0 `},
		{name: "unicode", doc: `{"é": "→ ok"}`},
		{name: "same key nested elsewhere", doc: `{"a": {"a": 1}, "b": {"a": 2}}`},
		{name: "duplicate key", doc: "{\n  \"status\": \"failed\",\n  \"status\": \"passed\"\n}", wantErr: `3:3: key "status" appears twice in the object`},
		{name: "duplicate key by escape", doc: `{"a": 1, "\u0061": 2}`, wantErr: `1:10: key "a" appears twice`},
		{name: "duplicate in a large object", doc: many + `"kxx":2}`, wantErr: `key "kxx" appears twice`},
		{name: "duplicate path", doc: `{"subject": [{"digest": {"sha256": "a", "sha256": "b"}}]}`, wantErr: `subject[0].digest: key "sha256" appears twice`},
		{name: "too deep", doc: strings.Repeat("[", 11) + strings.Repeat("]", 11), wantErr: "1:11: [0][0][0][0][0][0][0][0][0][0]: nesting deeper than 10 levels"},
		{name: "deep enough", doc: strings.Repeat("[", 10) + strings.Repeat("]", 10)},
		{name: "invalid utf-8", doc: "{\"a\": \"\xff\"}", wantErr: "1:8: a: invalid UTF-8 in a string"},
		{name: "control character", doc: "\"a\tb\"", wantErr: "control character 0x09"},
		{name: "trailing data", doc: `{} {}`, wantErr: `1:4: unexpected character '{' after the top-level value`},
		{name: "leading zero", doc: `01`, wantErr: "unexpected character '1' after the top-level value"},
		{name: "bad number", doc: `[1.]`, wantErr: "expected digits after '.'"},
		{name: "bad escape", doc: `"\x"`, wantErr: `invalid escape "\\x"`},
		{name: "bad unicode escape", doc: `"\u12g4"`, wantErr: `invalid \u escape`},
		{name: "trailing comma", doc: `[1,]`, wantErr: "expected a JSON value"},
		{name: "missing colon", doc: `{"a" 1}`, wantErr: "expected ':'"},
		{name: "unterminated", doc: `{"a": "b`, wantErr: "unexpected end of input in a string"},
		{name: "empty", doc: ` `, wantErr: "unexpected end of input"},
		{name: "key not a string", doc: `{1: 2}`, wantErr: "expected an object key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := jsonstrict.Check([]byte(tt.doc), 10)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			var je *jsonstrict.Error
			if !errors.As(err, &je) || je.Line < 1 || je.Col < 1 {
				t.Errorf("not a positioned *Error: %#v", err)
			}
		})
	}
}

// FuzzCheck: whatever Check accepts, encoding/json accepts too.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `"\ud800"`, `-0.0e-0`, `{"a":1,"a":2}`, "[\"\xc3\xa9\"]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if jsonstrict.Check(data, 64) == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
	})
}

// FuzzCheckObject: CheckObject accepts what Check accepts when it is an
// object, and its members are what encoding/json splits it into.
func FuzzCheckObject(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, ` { "_type" : "x" , "p" : {"q": [[[{"r":1}]]]} } `, `{"\u005ftype":1}`, `[1]`, `{"a":1,"a":2}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		top, err := jsonstrict.CheckObject(data, 64)
		checked := jsonstrict.Check(data, 64)
		if err != nil {
			if checked == nil && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
				t.Fatalf("Check accepts the object %q, CheckObject: %v", data, err)
			}
			return
		}
		if checked != nil {
			t.Fatalf("CheckObject accepts %q, Check: %v", data, checked)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("CheckObject accepts %q, encoding/json: %v", data, err)
		}
		if len(top) != len(want) {
			t.Fatalf("%q: %d members, encoding/json %d", data, len(top), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(top[k], v) {
				t.Fatalf("%q: member %q is %q, encoding/json %q", data, k, top[k], v)
			}
		}
	})
}

// TestCheckObject: the members of a statement-like object, keys decoded,
// values as written; a top-level value that is no object is refused with
// its position.
func TestCheckObject(t *testing.T) {
	deep := strings.Repeat(`{"n":`, 40) + "1" + strings.Repeat("}", 40)
	top, err := jsonstrict.CheckObject([]byte(` {"\u005ftype": "x", "deep": `+deep+`, "after": [1, 2] } `), 64)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"_type": `"x"`, "deep": deep, "after": `[1, 2]`}
	if len(top) != len(want) {
		t.Errorf("members %q, want %q", top, want)
	}
	for k, v := range want {
		if string(top[k]) != v {
			t.Errorf("member %q = %q, want %q", k, top[k], v)
		}
	}
	for _, bad := range []string{`[1]`, ` "x"`, ``, `{"a":1} x`, `{"a":1,"a":2}`} {
		if _, err := jsonstrict.CheckObject([]byte(bad), 64); err == nil {
			t.Errorf("CheckObject(%q) accepted", bad)
		}
	}
	if _, err := jsonstrict.CheckObject([]byte(`  [1]`), 64); err == nil || !strings.Contains(err.Error(), "1:3: ") || !strings.Contains(err.Error(), "expected a JSON object") {
		t.Errorf("an array: %v, want it refused at 1:3", err)
	}
}

// BenchmarkCheck: a 10 MB predicate of small objects.
func BenchmarkCheck(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"steps":[`)
	for i := 0; sb.Len() < 10<<20; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"id":"step","kind":"test","verdict":"passed"}`)
	}
	sb.WriteString("]}")
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := jsonstrict.Check(data, 64); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDeepPath: the field path stays right when nesting grows the
// scanner's stack.
func TestDeepPath(t *testing.T) {
	t.Parallel()
	doc := `{"a":` + strings.Repeat(`{"b":`, 100) + `{"x":1,"x":2}` + strings.Repeat("}", 100) + `}`
	err := jsonstrict.Check([]byte(doc), 200)
	want := "a" + strings.Repeat(".b", 100) + `: key "x" appears twice`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v", err)
	}
	doc = `{"k":1,"o":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100) + `,"k":2}`
	if err := jsonstrict.Check([]byte(doc), 200); err == nil || !strings.Contains(err.Error(), `key "k" appears twice`) {
		t.Fatalf("duplicate after a deep value: err = %v", err)
	}
}
