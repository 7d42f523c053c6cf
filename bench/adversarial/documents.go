package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline/engine"
)

// documentCases hand gpuattest hostile copies of the records it writes
// and reads back (issue 32): fleet.json to fleet collect, run.json to
// report. Each must be refused, naming its file, and must not crash:
// an unknown field, a duplicate key, a value of the wrong type, nesting
// past the bound. (The predicates' strict reads are unit tests:
// attest/dispatch TestDecodeIsStrict; the files' size bound, 256 MiB, is
// limits.RecordBytes, checked before a byte is decoded.)
func documentCases(ctx context.Context, l *lab) ([]result, error) {
	state := `{"dispatch":"/s/d","dispatchDigest":"sha256:aa","cluster":{"engine":"slurm","name":"c"},"jobScript":"sha256:bb",` +
		`"submittedAt":"2026-01-01T00:00:00Z","jobs":[{"name":"a-0","class":"a","index":0,"id":"1","status":{"id":"1","state":"RUNNING"}}],"done":false}`
	b, err := json.Marshal(&engine.Record{Schema: engine.RecordSchema, Pipeline: engine.PipelineRef{Name: "p"}})
	if err != nil {
		return nil, err
	}
	record := string(b)
	deep := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	// Each edit replaces old by new in fleet.json and runOld by runNew
	// in run.json (old and new when those are empty).
	edits := []struct{ name, old, new, runOld, runNew, says string }{
		{"unknown field", `{`, `{"extra":1,`, "", "", `unknown field "extra"`},
		{"duplicate key", `{`, `{"done":true,`, `{`, `{"pipeline":{},`, "appears twice"},
		{"wrong type", `"done":false`, `"done":"no"`, `"gpuattest_version":""`, `"gpuattest_version":7`, "expected"},
		{"nesting past the bound", `{`, `{"extra":` + deep + `,`, "", "", "nesting deeper than"},
	}
	var rs []result
	for _, e := range edits {
		dir := filepath.Join(l.dir, "documents", "fleet", e.name)
		if err := writeDoc(dir, "fleet.json", strings.Replace(state, e.old, e.new, 1)); err != nil {
			return nil, err
		}
		u, out, err := l.call(ctx, dir, []string{"GPUATTEST_FLEET_POLL=100ms"}, "fleet", "collect", dir, "-q", "--timeout", "5s")
		if err != nil {
			return nil, err
		}
		rs = append(rs, want("fleet.json: "+e.name, u, out, exits(u, 2), says(out, "fleet.json"), says(out, e.says)))
		body := strings.Replace(record, e.old, e.new, 1)
		if e.runOld != "" {
			body = strings.Replace(record, e.runOld, e.runNew, 1)
		}
		if body == record || !strings.Contains(state, e.old) {
			return nil, fmt.Errorf("documents: the edit %q does not apply", e.name)
		}
		dir = filepath.Join(l.dir, "documents", "run", e.name)
		if err := writeDoc(dir, "run.json", body); err != nil {
			return nil, err
		}
		u, out, err = l.call(ctx, dir, nil, "report", dir, "--markdown", filepath.Join(dir, "summary.md"))
		if err != nil {
			return nil, err
		}
		rs = append(rs, want("run.json: "+e.name, u, out, exits(u, 1, 2), says(out, "run.json"), says(out, e.says)))
	}
	return rs, nil
}

// writeDoc writes body as dir/name, making dir.
func writeDoc(dir, name, body string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
}
