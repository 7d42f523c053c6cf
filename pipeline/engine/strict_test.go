package engine_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
)

// TestReadRecordIsStrict: run.json is read strictly: an unknown field, a
// duplicate key, a value of the wrong type or another schema is refused,
// naming the field.
func TestReadRecordIsStrict(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(&engine.Record{Schema: engine.RecordSchema, Pipeline: engine.PipelineRef{Name: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	good := string(b)
	write := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(runlayout.Record(dir), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if r, err := engine.ReadRecord(write(good)); err != nil || r.Pipeline.Name != "p" {
		t.Fatalf("a well-formed record: %+v, %v", r, err)
	}
	schema := `"schema":"` + engine.RecordSchema + `"`
	for name, c := range map[string]struct{ body, want string }{
		"unknown field":  {strings.Replace(good, schema, schema+`,"extra":1`, 1), "extra"},
		"duplicate key":  {strings.Replace(good, schema, schema+`,"schema":"x"`, 1), "appears twice"},
		"wrong type":     {strings.Replace(good, `"gpuattest_version":""`, `"gpuattest_version":7`, 1), "gpuattest_version"},
		"another schema": {strings.Replace(good, schema, `"schema":"https://example.com/v9"`, 1), "schema"},
	} {
		if c.body == good {
			t.Fatalf("%s: the edit did not apply to %s", name, good)
		}
		if _, err := engine.ReadRecord(write(c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", name, err, c.want)
		}
	}
}
