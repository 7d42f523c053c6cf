package jsonstrict

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/problem"
)

type doc struct {
	Name  string            `json:"name"`
	Count int               `json:"count"`
	Ratio float64           `json:"ratio,omitempty"`
	When  time.Time         `json:"when,omitempty"`
	Items []item            `json:"items"`
	Tags  map[string]string `json:"tags,omitempty"`
	Raw   json.RawMessage   `json:"raw,omitempty"`
	Opt   *item             `json:"opt,omitempty"`
}

type item struct {
	ID   string `json:"id"`
	Flag bool   `json:"flag,omitempty"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, in string
		want     []string // one substring per problem, in order
	}{
		{"valid", `{"name":"a","count":3,"items":[{"id":"x","flag":true}],"tags":{"k":"v"},"raw":{"any":[1]},"when":"2026-01-02T03:04:05Z","opt":null}`, nil},
		{"every problem at once", "{\"name\":1,\"count\":1.5,\n\"items\":[{\"id\":\"x\",\"flg\":true},{}],\"tags\":{\"k\":2}}", []string{
			`f.json:1:9: name: expected a string, got a number`,
			`f.json:1:19: count: 1.5: expected an integer`,
			`f.json:2:20: items[0]: unknown field "flg"`,
			`f.json:2:32: items[1].id: missing`,
			`f.json:2:48: tags.k: expected a string, got a number`,
		}},
		{"missing at the top", `{"items":null}`, []string{`f.json:1:1: name: missing`, `f.json:1:1: count: missing`}},
		{"syntax stops", `{"name":"a",}`, []string{`f.json:1:13: unexpected character '}': expected an object key`}},
		{"duplicate key", `{"name":"a","name":"b","count":1,"items":[]}`, []string{`key "name" appears twice`}},
		{"not an object", `[1]`, []string{`expected an object, got an array`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			probs := Decode("f.json", []byte(tt.in), 16, &d)
			if len(probs) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(probs), len(tt.want), probs)
			}
			for i, w := range tt.want {
				if got := probs[i].String(); !strings.Contains(got, w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got, w)
				}
			}
			if len(tt.want) == 0 && (d.Name != "a" || d.Count != 3 || len(d.Items) != 1 || !d.Items[0].Flag) {
				t.Errorf("decoded %+v", d)
			}
		})
	}
}

type validated struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

func (v *validated) Validate() problem.List {
	var l problem.List
	if v.Name == "" {
		l.Add("name", "", "empty")
	}
	if v.Size < 1 {
		l.Add("size", "give a size", "%d: expected at least 1", v.Size)
	}
	return l
}

// TestRead: a missing field and Validate's problems come in one list, the
// missing field's reported once; a mistyped value stops before Validate.
func TestRead(t *testing.T) {
	t.Parallel()
	var v validated
	got := Read("v.json", []byte(`{"size": 0}`), 8, &v).Error()
	want := "v.json:1:1: name: missing\nv.json: size: 0: expected at least 1\nhint: give a size"
	if got != want {
		t.Errorf("Read =\n%s\nwant\n%s", got, want)
	}
	got = Read("v.json", []byte(`{"name": "a", "sise": 3}`), 8, &v).Error()
	want = "v.json:1:15: unknown field \"sise\"\nv.json:1:1: size: missing"
	if got != want {
		t.Errorf("Read of an unknown field =\n%s\nwant\n%s", got, want)
	}
	if probs := Read("v.json", []byte(`{"name": "a", "size": "big"}`), 8, &v); len(probs) != 1 || probs[0].Path != "size" {
		t.Errorf("mistyped: %v", probs)
	}
	if probs := Read("v.json", []byte(`{"name": "a", "size": 2}`), 8, &v); probs != nil || v.Size != 2 {
		t.Errorf("valid: %v, %+v", probs, v)
	}
}
