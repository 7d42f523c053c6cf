package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpuattest/gpuattest/internal/rusage"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// crashPipeline is a CUDA build (cached after the first run), two chains
// of short steps and a test over all of them. Step b2 fails the first
// time it runs, so the first attempt signs a failed run and only a resume
// passes.
func crashPipeline() string {
	var b strings.Builder
	b.WriteString("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: crash\ntargets: [sm_80]\nsteps:\n")
	b.WriteString("  - id: build\n    kind: cuda-build\n    sources: [k.cu]\n    reproducible: off\n")
	for _, chain := range []string{"a", "b"} {
		for i := 1; i <= 3; i++ {
			run := fmt.Sprintf("sleep 0.2; echo %s%d >> ran.log", chain, i)
			if chain == "b" && i == 2 {
				run += "; test -e flaky.ok || { touch flaky.ok; exit 1; }"
			}
			fmt.Fprintf(&b, "  - id: %s%d\n    run: %s\n", chain, i, run)
			if i > 1 {
				fmt.Fprintf(&b, "    needs: [%s%d]\n", chain, i-1)
			}
		}
	}
	b.WriteString("  - id: test\n    kind: test\n    needs: [build, a3, b3]\n    run: sleep 0.2; printf '{\"schema\":\"https://gpuattest.dev/results/v1\",\"tool\":\"t\",\"backend\":\"cpu\",\"cases\":[{\"name\":\"a\",\"status\":\"passed\"}]}' > r.json\n    results: r.json\n")
	return b.String()
}

// crashLab is the key and the pipeline of the crash cases.
type crashLab struct {
	*lab
	dir, key string
}

// crashCases kills a signed run with SIGKILL at random points (5 times,
// 20 in the long mode), then resumes it: run.json must parse after every
// kill, the resume must finish and verify, and no attestation, left by
// the killed run or written by the resume, may claim a step that run.json
// does not record as passed.
func crashCases(ctx context.Context, l *lab) ([]result, error) {
	c := &crashLab{lab: l, dir: filepath.Join(l.dir, "crash")}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	prefix, err := l.keyPair(ctx, c.dir, "rel")
	if err != nil {
		return nil, err
	}
	c.key = prefix
	// A first whole run fills the build cache, a second times the run
	// (its first attempt, which fails at b2).
	var whole time.Duration
	for _, name := range []string{"first", "second"} {
		proj, err := project(filepath.Join(c.dir, name), crashPipeline())
		if err != nil {
			return nil, err
		}
		u, out, err := c.run(ctx, proj, 0, "--out", filepath.Join(c.dir, name, "run"))
		if err != nil || u.Exit != 1 {
			return nil, fmt.Errorf("the whole run: exit %d, want 1 (b2 fails once), %v\n%s", u.Exit, err, out)
		}
		whole = u.Wall
	}
	rng := l.rng("crash")
	var rs []result
	for i := range l.n(5, 20) {
		after := 50*time.Millisecond + time.Duration(rng.Int64N(int64(whole)))
		r, err := c.kill(ctx, i, after)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// run runs the crash pipeline in proj, signed, killed after killAfter
// when it is set.
func (c *crashLab) run(ctx context.Context, proj string, killAfter time.Duration, args ...string) (rusage.Usage, string, error) {
	return c.spawner.run(ctx, spawnReq{Dir: proj, Env: append(c.env[:len(c.env):len(c.env)], "GPUATTEST_PASSWORD="),
		Argv: append([]string{c.bin, "run", "p.yaml", "--key", c.key + ".key", "-q"}, args...), Timeout: 5 * time.Minute, KillAfter: killAfter})
}

// kill is one case: a run killed after the given time, then resumed.
func (c *crashLab) kill(ctx context.Context, i int, after time.Duration) (result, error) {
	dir := filepath.Join(c.dir, fmt.Sprint(i))
	defer os.RemoveAll(dir)
	proj, err := project(dir, crashPipeline())
	if err != nil {
		return result{}, err
	}
	runDir := filepath.Join(dir, "run")
	res := result{name: fmt.Sprintf("kill -9 after %s", after.Round(time.Millisecond)), right: true}
	u, out, err := c.run(ctx, proj, after, "--out", runDir)
	if err != nil {
		return result{}, err
	}
	res.usage = u
	fail := func(format string, args ...any) (result, error) {
		res.right, res.why = false, fmt.Sprintf(format, args...)
		return res, nil
	}
	switch {
	case u.Signal == syscall.SIGKILL:
	case u.Exit == 1:
		res.name += " (finished first, b2 failed)"
	default:
		return fail("the run exited %d before the kill, want 1 (b2 fails once)%s", u.Exit, tail(out))
	}
	resume := []string{"--resume", runDir}
	if _, err := os.Stat(filepath.Join(runDir, "run.json")); err != nil {
		// Killed before it wrote run.json: nothing to resume, start again.
		res.name += " (before run.json)"
		resume = []string{"--out", runDir}
		os.RemoveAll(runDir)
	} else if why := c.consistent(runDir, false); why != "" {
		return fail("after the kill: %s", why)
	}
	// b2 fails the first time it runs: when the kill came before it, the
	// first resume signs a failed run and a second one passes.
	for attempt := 1; ; attempt++ {
		u, out, err = c.run(ctx, proj, 0, resume...)
		if err != nil {
			return result{}, err
		}
		resume = []string{"--resume", runDir}
		if u.Exit == 1 && attempt == 1 && strings.Contains(out, "b2") {
			if why := c.consistent(runDir, false); why != "" {
				return fail("after a failed resume: %s", why)
			}
			continue
		}
		if ok, why := exitIn(u, out, 0); !ok {
			return fail("resume %d: %s", attempt, why)
		}
		break
	}
	if why := c.consistent(runDir, true); why != "" {
		return fail("after the resume: %s", why)
	}
	arts, _ := filepath.Glob(filepath.Join(runDir, "steps", "build", "outputs", "build", "*.fatbin"))
	args := append([]string{"verify", "--bundle", filepath.Join(runDir, "attestations.intoto.jsonl"), "--key", c.key + ".pub", "--policy", "builtin:cpu-tier"}, arts...)
	vu, vout, err := c.call(ctx, dir, nil, args...)
	if err != nil {
		return result{}, err
	}
	if ok, why := exitIn(vu, vout, 0); !ok || len(arts) == 0 {
		return fail("verify of the resumed run (%d artifacts): %s", len(arts), why)
	}
	return res, nil
}

// consistent checks a run directory: run.json parses, and the validation
// statement, when there is one, claims as passed only steps run.json
// records as passed. done requires a finished, passed run with its
// attestations.
func (c *crashLab) consistent(runDir string, done bool) string {
	raw, err := os.ReadFile(filepath.Join(runDir, "run.json"))
	if err != nil {
		return "run.json: " + err.Error()
	}
	if !json.Valid(raw) {
		return "run.json is not JSON"
	}
	rec, err := engine.ReadRecord(runDir)
	if err != nil {
		return err.Error()
	}
	if done && rec.State != runtypes.Passed {
		return fmt.Sprintf("run state %s (%s)", rec.State, rec.Reason)
	}
	jsonl, err := os.ReadFile(filepath.Join(runDir, "attestations.intoto.jsonl"))
	if os.IsNotExist(err) && !done {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		st, err := statementOf(line)
		if err != nil {
			return "attestations: " + err.Error()
		}
		pred, _ := st["predicate"].(map[string]any)
		steps, _ := pred["steps"].([]any)
		for _, s := range steps {
			m, _ := s.(map[string]any)
			id, _ := m["id"].(string)
			verdict, _ := m["verdict"].(string)
			sr := rec.Step(id)
			if (verdict == "passed" || verdict == "cached") && (sr == nil || sr.State != runtypes.Passed) {
				return fmt.Sprintf("the statement says step %s %s, run.json says %v", id, verdict, sr)
			}
		}
		if pred != nil && pred["result"] == "passed" && rec.State != runtypes.Passed {
			return fmt.Sprintf("the statement says passed, run.json says %s", rec.State)
		}
	}
	return ""
}
