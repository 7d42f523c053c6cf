package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gpuattest/gpuattest/internal/rusage"
)

// signingEnv are the signing secrets a signed run holds, with values.
var signingEnv = []string{
	"GPUATTEST_PASSWORD=adv-key-password", "COSIGN_PASSWORD=adv-cosign-password", "SIGSTORE_ID_TOKEN=eyJadv.oidc.token",
	"ACTIONS_ID_TOKEN_REQUEST_TOKEN=adv-request-token", "ACTIONS_ID_TOKEN_REQUEST_URL=https://adv.example/token",
}

// peekPipeline has a build and a step that records what a step can see of
// the signing secrets: its environment, and its parent's (gpuattest's)
// initial environment and command line.
const peekPipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: peek
targets: [sm_80]
steps:
  - id: build
    kind: cuda-build
    sources: [k.cu]
    reproducible: off
  - id: peek
    run: env > env.txt; tr '\0' '\n' < /proc/$PPID/environ > parent-env.txt; touch ran
  - id: steal
    run: ln -sf "$(tr '\0' '\n' < /proc/$PPID/cmdline | grep '\.key$' | head -1)" stolen.key; touch ran
    outputs: ['*.key']
`

// keyCases (issue 14 §0): the signing key and its secrets are out of the
// steps' reach. A signed run's steps see none of the secrets in their
// environment nor in gpuattest's (/proc/$PPID/environ); a step that links
// the key (found through gpuattest's command line) into its outputs
// fails and copies nothing; a key inside the pipeline's root, named
// directly, through a symlink or a path with "..", is refused before any
// step runs.
func keyCases(ctx context.Context, l *lab) ([]result, error) {
	dir := filepath.Join(l.dir, "key")
	proj, err := project(dir, peekPipeline)
	if err != nil {
		return nil, err
	}
	if out, err := l.callOK(ctx, dir, signingEnv[:1], "key", "generate", "--output-key-prefix", filepath.Join(dir, "rel")); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, out)
	}
	key := filepath.Join(dir, "rel.key")
	run := filepath.Join(dir, "run")
	u, out, err := l.call(ctx, proj, signingEnv, "run", "p.yaml", "--out", run, "--key", key)
	if err != nil {
		return nil, err
	}
	var rs []result
	r := result{name: "signed run: the step linking the key into its outputs fails, nothing copied", usage: u}
	r.right, r.why = exitIn(u, out, 1)
	if _, err := os.Lstat(filepath.Join(run, "steps", "steal", "outputs", "stolen.key")); r.right && err == nil {
		r.right, r.why = false, "the key was copied into the run directory"
	} else if r.right && !regexp.MustCompile(`stolen\.key`).MatchString(out) {
		r.right, r.why = false, "the failure does not name stolen.key"+tail(out)
	}
	rs = append(rs, r)
	for _, file := range []string{"env.txt", "parent-env.txt"} {
		seen, err := os.ReadFile(filepath.Join(proj, file))
		if err != nil {
			return nil, err
		}
		for _, kv := range append(signingEnv, "KEY_PATH="+key) {
			name, value, _ := strings.Cut(kv, "=")
			r := result{name: fmt.Sprintf("%s not in the step's %s", name, file), right: true, usage: u}
			if strings.Contains(string(seen), value) {
				r.right, r.why = false, "the step saw "+value
			}
			rs = append(rs, r)
		}
	}
	os.Remove(filepath.Join(proj, "ran"))
	rs = append(rs, l.keyInRoot(ctx, proj, dir)...)
	return rs, nil
}

// keyInRoot runs the pipeline with the key inside its root, in three
// spellings: each is refused with exit 2 before any step runs.
func (l *lab) keyInRoot(ctx context.Context, proj, dir string) []result {
	key, err := os.ReadFile(filepath.Join(dir, "rel.key"))
	if err == nil {
		err = os.MkdirAll(filepath.Join(proj, "sub"), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(proj, "sub", "in.key"), key, 0o600)
	}
	if err == nil {
		err = os.Symlink(filepath.Join(dir, "rel.key"), filepath.Join(proj, "link.key"))
	}
	if err != nil {
		return []result{{name: "key inside the root: setup", why: err.Error()}}
	}
	var rs []result
	for _, k := range []string{"sub/in.key", "link.key", "sub/../sub/in.key", filepath.Join(proj, "sub", "in.key")} {
		run := filepath.Join(dir, "refused")
		u, out, err := l.call(ctx, proj, signingEnv, "run", "p.yaml", "--out", run, "--key", k)
		r := result{name: "key inside the root refused: --key " + strings.TrimPrefix(k, dir), usage: u}
		switch {
		case err != nil:
			r.why = err.Error()
		default:
			r.right, r.why = refusedBeforeSteps(u, out, proj, run)
		}
		rs = append(rs, r)
	}
	return rs
}

// refusedBeforeSteps checks a run refused as invalid (exit 2) for a key in
// the root, with nothing run and no run directory.
func refusedBeforeSteps(u rusage.Usage, out, proj, run string) (bool, string) {
	if ok, why := exitIn(u, out, 2); !ok {
		return false, why
	}
	if !strings.Contains(out, "inside the pipeline's root") {
		return false, "the refusal does not say the key is inside the root" + tail(out)
	}
	if _, err := os.Stat(filepath.Join(proj, "ran")); err == nil {
		return false, "a step ran"
	}
	if _, err := os.Stat(run); err == nil {
		return false, "a run directory was written"
	}
	return true, ""
}
