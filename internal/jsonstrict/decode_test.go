package jsonstrict

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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
			`f.json:2:32: items[1]: missing required field "id"`,
			`f.json:2:48: tags.k: expected a string, got a number`,
		}},
		{"missing at the top", `{"items":null}`, []string{`f.json:1:1: missing required field "name"`, `missing required field "count"`}},
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
			if tt.want == nil && (d.Name != "a" || d.Count != 3 || len(d.Items) != 1 || !d.Items[0].Flag) {
				t.Errorf("decoded %+v", d)
			}
		})
	}
}
