package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// tamperPipeline builds and runs a test with one failed case.
const tamperPipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: tamper
targets: [sm_80]
steps:
  - id: build
    kind: cuda-build
    sources: [k.cu]
    reproducible: off
  - id: test
    kind: test
    needs: [build]
    run: printf '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed"},{"name":"b","status":"failed"}]}' > r.json
    results: r.json
`

// tamper is an edit of a failed run's directory before a signed resume.
type tamper struct {
	name string
	edit func(run string) error
	want string // what the refusal says
}

// editRecord rewrites run.json through a function of its decoded JSON.
func editRecord(run string, f func(rec map[string]any, test map[string]any)) error {
	p := filepath.Join(run, "run.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		return err
	}
	for _, s := range rec["steps"].([]any) {
		if m := s.(map[string]any); m["id"] == "test" {
			f(rec, m)
		}
	}
	out, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, out, 0o644)
}

// passTest marks the test step passed in run.json.
func passTest(rec, test map[string]any) {
	test["state"] = "passed"
	test["exit_code"] = 0
	delete(test, "reason")
}

// forgeResults writes a passing copy of the results in the step
// directory.
func forgeResults(run string) (string, error) {
	p := filepath.Join(run, "steps", "test", "results.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	forged := bytes.ReplaceAll(raw, []byte(`"failed"`), []byte(`"passed"`))
	sum := sha256.Sum256(forged)
	return hex.EncodeToString(sum[:]), os.WriteFile(p, forged, 0o644)
}

func tampers() []tamper {
	return []tamper{
		{"test state edited to passed", func(run string) error { return editRecord(run, passTest) }, `refusing to sign: step test is recorded as passed, but its results say failed`},
		{"state and the results copy edited", func(run string) error {
			if _, err := forgeResults(run); err != nil {
				return err
			}
			return editRecord(run, passTest)
		}, `refusing to sign: step test is recorded as passed, but .*results.json: sha256 [0-9a-f]+, but run.json records`},
		{"state edited, details say no failures", func(run string) error {
			return editRecord(run, func(rec, test map[string]any) {
				passTest(rec, test)
				test["details"] = map[string]any{"results": "r.json", "format": "gpuattest", "counts": map[string]any{"total": 2, "passed": 2}}
			})
		}, `refusing to sign: step test is recorded as passed, but its results say failed`},
		{"state edited, results record removed", func(run string) error {
			return editRecord(run, func(rec, test map[string]any) { passTest(rec, test); delete(test, "results") })
		}, `refusing to sign: step test is recorded as passed, but`},
		{"state edited, kind changed to exec", func(run string) error {
			return editRecord(run, func(rec, test map[string]any) { passTest(rec, test); test["kind"] = "exec" })
		}, `(refusing to sign: step test: run.json records kind exec, the pipeline says test|run.json: step test: exec details: json: unknown field)`},
		{"whole run edited to passed", func(run string) error {
			return editRecord(run, func(rec, test map[string]any) {
				passTest(rec, test)
				rec["state"] = "passed"
				delete(rec, "reason")
			})
		}, `refusing to sign: step test is recorded as passed, but its results say failed`},
	}
}

// resumeCases runs a signed pipeline whose test fails, then edits its run
// directory in each way a forger might and resumes it signed: every
// resume refuses to sign, naming the step, and leaves the honest
// attestations of the failed run as they were. Not a case: editing the
// state, the results copy and the digest run.json records for it all
// together is signed (docs/run-directory.md: the run directory is not a trust root).
func resumeCases(ctx context.Context, l *lab) ([]result, error) {
	dir := filepath.Join(l.dir, "resume")
	proj, err := project(dir, tamperPipeline)
	if err != nil {
		return nil, err
	}
	key, err := l.keyPair(ctx, dir, "rel")
	if err != nil {
		return nil, err
	}
	base := filepath.Join(dir, "base")
	signed := []string{"GPUATTEST_PASSWORD="}
	if u, out, err := l.call(ctx, proj, signed, "run", "p.yaml", "--out", base, "--key", key+".key"); err != nil || u.Exit != 1 {
		return nil, fmt.Errorf("the failing run: exit %d, %v\n%s", u.Exit, err, out)
	}
	honest, err := os.ReadFile(filepath.Join(base, "attestations.intoto.jsonl"))
	if err != nil {
		return nil, err
	}
	var rs []result
	for i, t := range tampers() {
		run := filepath.Join(dir, fmt.Sprintf("run%d", i))
		if out, err := exec.Command("cp", "-a", base, run).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("cp: %v\n%s", err, out)
		}
		if err := t.edit(run); err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		u, out, err := l.call(ctx, proj, signed, "run", "p.yaml", "--resume", run, "--key", key+".key")
		if err != nil {
			return nil, err
		}
		r := result{name: t.name, usage: u}
		r.right, r.why = exitIn(u, out, 1)
		after, rerr := os.ReadFile(filepath.Join(run, "attestations.intoto.jsonl"))
		switch {
		case !r.right:
		case !regexp.MustCompile(t.want).MatchString(out):
			r.right, r.why = false, "the output does not say "+t.want+tail(out)
		case rerr != nil || !bytes.Equal(after, honest):
			r.right, r.why = false, "the failed run's attestations changed"
		}
		rs = append(rs, r)
	}
	return rs, nil
}
