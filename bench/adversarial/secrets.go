package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// kernelSource is the one CUDA file of the signed pipelines.
const kernelSource = "extern \"C\" __global__ void scale(float *x, float a, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n"

// project writes dir/proj/p.yaml and k.cu and returns proj.
func project(dir, yaml string) (string, error) {
	proj := filepath.Join(dir, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(proj, "k.cu"), []byte(kernelSource), 0o644); err != nil {
		return "", err
	}
	return proj, os.WriteFile(filepath.Join(proj, "p.yaml"), []byte(yaml), 0o644)
}

// secretVar is a variable whose value must never be recorded.
type secretVar struct {
	name, value string
	where       string // host or step
}

func secretVars(tag string) []secretVar {
	v := func(name, where string) secretVar {
		return secretVar{name: name, value: fmt.Sprintf("adv-%s-%s-%x", tag, strings.ToLower(name), len(name)*7919), where: where}
	}
	return []secretVar{
		v("GITHUB_TOKEN", "host"), v("CI_JOB_TOKEN", "host"), v("MY_SECRET_VALUE", "host"), v("DB_PASSWORD", "host"),
		v("AWS_ACCESS_KEY_ID", "host"), v("AWS_SECRET_ACCESS_KEY", "host"), v("AWS_SESSION_TOKEN", "host"),
		v("GPUATTEST_PASSWORD", "host"),
		v("API_TOKEN", "step"), v("CLIENT_SECRET", "step"), v("SMTP_PASSWORD", "step"), v("AWS_REGION_SECRETISH", "step"),
		v("PIPE_TOKEN", "pipeline"),
	}
}

// secretsPipeline builds, tests and runs a step with secrets in its
// environment; no step prints them.
func secretsPipeline(vars []secretVar, failing string) string {
	var stepEnv, pipeEnv strings.Builder
	for _, s := range vars {
		switch s.where {
		case "step":
			fmt.Fprintf(&stepEnv, "      %s: %s\n", s.name, s.value)
		case "pipeline":
			fmt.Fprintf(&pipeEnv, "  %s: %s\n", s.name, s.value)
		}
	}
	return "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: secrets\ntargets: [sm_80]\nenv:\n" + pipeEnv.String() + `steps:
  - id: build
    kind: cuda-build
    sources: [k.cu]
    reproducible: off
    env:
` + stepEnv.String() + `  - id: work
    run: env
    env:
` + stepEnv.String() + `  - id: test
    kind: test
    needs: [build, work]
    run: printf '{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"passed"}]}' > r.json
    results: r.json
    env:
` + stepEnv.String() + failing
}

// secretCases runs a signed pipeline with secrets in the host and step
// environments, once passing and once with steps that fail after
// printing their environment, and looks for the values in everything
// gpuattest writes but the steps' own logs: run.json, hardware.json, the
// statements (the bundles' payloads decoded), report.html and the
// Markdown report. The logs are checked too: each value but the signing
// password reached the step (so its absence elsewhere means something),
// and the password never did.
func secretCases(ctx context.Context, l *lab) ([]result, error) {
	var rs []result
	for _, v := range []struct{ name, failing string }{
		{"passing", ""},
		{"failing", "  - id: fail\n    needs: [build]\n    run: env >&2; exit 3\n  - id: badtest\n    kind: test\n    run: env; exit 4\n    results: none.json\n"},
	} {
		more, err := l.secretRun(ctx, v.name, v.failing)
		if err != nil {
			return nil, err
		}
		rs = append(rs, more...)
	}
	return rs, nil
}

// secretRun runs one signed secrets pipeline and checks what it wrote.
func (l *lab) secretRun(ctx context.Context, name, failing string) ([]result, error) {
	dir := filepath.Join(l.dir, "secrets", name)
	vars := secretVars(name)
	proj, err := project(dir, secretsPipeline(vars, failing))
	if err != nil {
		return nil, err
	}
	var password string
	var hostEnv []string
	for _, s := range vars {
		if s.where == "host" {
			hostEnv = append(hostEnv, s.name+"="+s.value)
		}
		if s.name == "GPUATTEST_PASSWORD" {
			password = s.value
		}
	}
	if out, err := l.callOK(ctx, dir, []string{"GPUATTEST_PASSWORD=" + password}, "key", "generate", "--output-key-prefix", filepath.Join(dir, "rel")); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, out)
	}
	run := filepath.Join(dir, "run")
	u, out, err := l.call(ctx, proj, hostEnv, "run", "p.yaml", "--out", run, "--key", filepath.Join(dir, "rel.key"))
	if err != nil {
		return nil, err
	}
	want := 0
	if failing != "" {
		want = 1
	}
	if ok, why := exitIn(u, out, want); !ok {
		return []result{{name: name + ": signed run with secrets in its environment", why: why, usage: u}}, nil
	}
	ru, rout, err := l.call(ctx, dir, hostEnv, "report", run, "--markdown", filepath.Join(run, "summary.md"))
	if err != nil {
		return nil, err
	}
	if ok, why := exitIn(ru, rout, 0); !ok {
		return []result{{name: name + ": report of the run", why: why, usage: ru}}, nil
	}
	docs, err := recorded(run)
	if err != nil {
		return nil, err
	}
	logs, err := os.ReadFile(filepath.Join(run, "steps", "work", "stdout.log"))
	if err != nil {
		return nil, err
	}
	var rs []result
	for _, s := range vars {
		reached := bytes.Contains(logs, []byte(s.value))
		r := result{name: fmt.Sprintf("%s: %s (%s env) reached the step", name, s.name, s.where), right: reached, usage: u}
		if s.name == "GPUATTEST_PASSWORD" {
			r.name, r.right = fmt.Sprintf("%s: %s never reached a step", name, s.name), !reached
		}
		if !r.right {
			r.why = "steps/work/stdout.log (the step's env) says otherwise"
		}
		rs = append(rs, r)
		for _, d := range docs {
			r := result{name: fmt.Sprintf("%s: %s (%s env) not in %s", name, s.name, s.where, d.name), right: true, usage: u}
			if i := bytes.Index(d.data, []byte(s.value)); i >= 0 {
				r.right, r.why = false, fmt.Sprintf("the value appears at byte %d: %q", i, d.data[max(0, i-80):min(len(d.data), i+len(s.value)+20)])
			}
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// doc is a file gpuattest wrote, or a statement decoded from a bundle.
type doc struct {
	name string
	data []byte
}

// recorded is every file of the run directory but the steps' logs and
// copied outputs (the steps' own bytes), with each bundle's statement
// decoded.
func recorded(run string) ([]doc, error) {
	var docs []doc
	err := filepath.WalkDir(run, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(run, p)
		if strings.HasSuffix(rel, ".log") || strings.Contains(rel, string(filepath.Separator)+"outputs"+string(filepath.Separator)) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		docs = append(docs, doc{rel, b})
		if strings.HasSuffix(rel, ".jsonl") {
			for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				st, err := statementOf(line)
				if err != nil {
					return fmt.Errorf("%s:%d: %w", rel, i+1, err)
				}
				docs = append(docs, doc{fmt.Sprintf("statement %d (%s)", i+1, st["predicateType"]), mustJSON(st)})
			}
		}
		return nil
	})
	return docs, err
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// callOK is call that fails unless gpuattest exits 0.
func (l *lab) callOK(ctx context.Context, dir string, extra []string, args ...string) (string, error) {
	u, out, err := l.call(ctx, dir, extra, args...)
	if err == nil && u.Exit != 0 {
		err = fmt.Errorf("gpuattest %s: exit %d", strings.Join(args, " "), u.Exit)
	}
	return out, err
}
