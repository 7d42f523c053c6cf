package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lintIn writes src as p.yaml into dir (a directory in no git work tree
// unless the test makes one) and returns its problems.
func lintIn(t *testing.T, dir, src string, opts ...LoadOption) Problems {
	t.Helper()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, opts...)
	if err == nil {
		return nil
	}
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("error is %T, want Problems: %v", err, err)
	}
	return probs
}

// TestStepPathsStayInsideRoot is the lint half of the sandbox rule: every
// path a step names stays inside the pipeline's root (inside the step's
// workdir for paths relative to it), and each escape is refused with its
// position.
func TestStepPathsStayInsideRoot(t *testing.T) {
	t.Parallel()
	test := "steps:\n  - id: t\n    kind: test\n    run: x\n"
	bench := "steps:\n  - id: b\n    kind: benchmark\n    run: x\n    results: r.json\n"
	build := "targets: [sm_80]\nsteps:\n  - id: k\n    kind: cuda-build\n"
	tests := []struct {
		name      string
		src       string
		line, col int
		want      string
	}{
		{"step workdir climbs to a host directory", "steps:\n  - id: a\n    run: x\n    workdir: ../hostsecret\n", 7, 14, `workdir "../hostsecret" leaves the pipeline's root`},
		{"step workdir climbs to /", "steps:\n  - id: a\n    run: x\n    workdir: ../../../../../../../..\n", 7, 14, `workdir "../../../../../../../.." leaves the pipeline's root`},
		{"step workdir climbs through a subdirectory", "steps:\n  - id: a\n    run: x\n    workdir: sub/../../x\n", 7, 14, `workdir "sub/../../x" leaves the pipeline's root`},
		{"step workdir absolute", "steps:\n  - id: a\n    run: x\n    workdir: /etc\n", 7, 14, `workdir "/etc" must be relative`},
		{"results absolute", test + "    results: /abs/path/victim.json\n", 8, 14, `results "/abs/path/victim.json" must be relative`},
		{"results climbs out", test + "    results: ../outside/victim.json\n", 8, 14, `results "../outside/victim.json" leaves the step's workdir`},
		{"results climbs out of the step workdir", test + "    workdir: kernels\n    results: ../victim.json\n", 9, 14, `results "../victim.json" leaves the step's workdir`},
		{"baseline absolute", bench + "    baseline: /etc/baseline.json\n", 9, 15, `baseline "/etc/baseline.json" must be relative`},
		{"baseline climbs out", bench + "    baseline: ../../victim.json\n", 9, 15, `baseline "../../victim.json" leaves the pipeline's root`},
		{"reference results climb out", bench + "    reference:\n      run: y\n      results: ../ref.json\n", 11, 16, `reference.results "../ref.json" leaves the step's workdir`},
		{"reference results absolute", bench + "    reference: {run: y, results: /tmp/victim.json}\n", 9, 34, `reference.results "/tmp/victim.json" must be relative`},
		{"reference release layout climbs out", bench + "    reference: {run: y, results: q.json, release: oci-layout:../rel, key: k.pub}\n", 9, 51, `reference.release "../rel" leaves the pipeline's root`},
		{"reference release layout absolute", bench + "    reference: {run: y, results: q.json, release: 'oci-layout:/srv/rel@sha256:" + strings.Repeat("a", 64) + "', key: k.pub}\n", 9, 51, `reference.release "/srv/rel" must be relative`},
		{"reference key climbs out", bench + "    reference: {run: y, results: q.json, release: oci-layout:rel, key: ../../k.pub}\n", 9, 72, `reference.key "../../k.pub" leaves the pipeline's root`},
		{"reference policy absolute", bench + "    reference: {run: y, results: q.json, release: oci-layout:rel, key: k.pub, policy: /etc/p.yaml}\n", 9, 87, `reference.policy "/etc/p.yaml" must be relative`},
		{"sources climb out", build + "    sources: [k.cu, ../x.cu]\n", 8, 21, `sources[1] "../x.cu" leaves the step's workdir`},
		{"sources absolute", build + "    sources: [/etc/shadow]\n", 8, 15, `sources[0] "/etc/shadow" must be relative`},
		{"outDir climbs out", build + "    sources: [k.cu]\n    outDir: ../out\n", 9, 13, `outDir "../out" leaves the step's workdir`},
		{"output glob climbs out", "steps:\n  - id: a\n    run: x\n    outputs: [a, ../b/*.key]\n", 7, 18, `glob "../b/*.key" must stay inside the work directory`},
		{"input glob absolute", "steps:\n  - id: a\n    run: x\n    inputs: [/etc/*]\n", 7, 14, `glob "/etc/*" must stay inside the work directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			probs := lintIn(t, t.TempDir(), header+tt.src)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(probs), probs)
			}
			p := probs[0]
			if p.Line != tt.line || p.Col != tt.col || !strings.Contains(p.Message, tt.want) {
				t.Errorf("got %d:%d %q, want %d:%d containing %q", p.Line, p.Col, p.Message, tt.line, tt.col, tt.want)
			}
			if p.Hint == "" {
				t.Errorf("no hint: %v", p)
			}
		})
	}
	t.Run("paths inside are fine", func(t *testing.T) {
		t.Parallel()
		src := header + "targets: [sm_80]\nsteps:\n  - id: k\n    kind: cuda-build\n    workdir: a/../kernels\n    sources: [k.cu, sub/../j.cu]\n    outDir: out/../build\n" +
			"  - id: b\n    kind: benchmark\n    run: x\n    workdir: kernels\n    results: build/../r.json\n    baseline: baselines/cpu.json\n    inputs: ['**/*.h']\n    outputs: [build/**]\n" +
			"    reference: {run: y, results: q.json, release: 'oci-layout:releases/v1@sha256:" + strings.Repeat("0", 64) + "', key: keys/release.pub, policy: policies/cpu.yaml}\n"
		if probs := lintIn(t, t.TempDir(), src); len(probs) > 0 {
			t.Errorf("unexpected problems:\n%v", probs)
		}
	})
}

// TestPipelineWorkdirCeiling: the pipeline's workdir (its root) may climb
// above the pipeline file, but not above the enclosing git work tree, or
// the file's own directory when there is none.
func TestPipelineWorkdirCeiling(t *testing.T) {
	t.Parallel()
	src := header + "workdir: ..\nsteps:\n  - id: a\n    run: x\n"
	t.Run("no git work tree", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "pipelines")
		os.Mkdir(dir, 0o755)
		probs := lintIn(t, dir, src)
		if len(probs) != 1 || probs[0].Line != 4 || probs[0].Col != 10 || !strings.Contains(probs[0].Message, `workdir ".." climbs above`) {
			t.Fatalf("got %v, want one problem at 4:10", probs)
		}
	})
	t.Run("repository root", func(t *testing.T) {
		t.Parallel()
		repo := t.TempDir()
		os.Mkdir(filepath.Join(repo, ".git"), 0o755)
		dir := filepath.Join(repo, "pipelines")
		os.Mkdir(dir, 0o755)
		if probs := lintIn(t, dir, src); len(probs) > 0 {
			t.Fatalf("workdir .. to the repository root refused:\n%v", probs)
		}
		deeper := header + "workdir: ../..\nsteps:\n  - id: a\n    run: x\n"
		probs := lintIn(t, dir, deeper)
		if len(probs) != 1 || probs[0].Line != 4 || !strings.Contains(probs[0].Message, "climbs above") || !strings.Contains(probs[0].Message, "git work tree") {
			t.Fatalf("got %v, want the git work tree to be the ceiling", probs)
		}
	})
	t.Run("through a symlink", func(t *testing.T) {
		t.Parallel()
		base := t.TempDir()
		dir := filepath.Join(base, "p")
		os.Mkdir(dir, 0o755)
		os.Symlink("..", filepath.Join(dir, "up"))
		probs := lintIn(t, dir, header+"workdir: up\nsteps:\n  - id: a\n    run: x\n")
		if len(probs) != 1 || probs[0].Line != 4 || !strings.Contains(probs[0].Message, `workdir "up" resolves to `+base+" (through a symlink)") {
			t.Fatalf("got %v, want the symlinked root refused", probs)
		}
	})
	t.Run("a worktree's .git file counts", func(t *testing.T) {
		t.Parallel()
		repo := t.TempDir()
		os.WriteFile(filepath.Join(repo, ".git"), []byte("gitdir: /elsewhere\n"), 0o644)
		dir := filepath.Join(repo, "pipelines")
		os.Mkdir(dir, 0o755)
		if probs := lintIn(t, dir, src); len(probs) > 0 {
			t.Fatalf("workdir .. in a git worktree refused:\n%v", probs)
		}
	})
}

// TestWithRoot: an explicit root widens (or narrows) what the pipeline's
// workdir may reach; step paths still stay inside the pipeline's root.
func TestWithRoot(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "a", "pipelines")
	os.MkdirAll(dir, 0o755)
	src := header + "workdir: ../..\nsteps:\n  - id: a\n    run: x\n"
	if probs := lintIn(t, dir, src, WithRoot(base)); len(probs) > 0 {
		t.Fatalf("workdir inside the given root refused:\n%v", probs)
	}
	probs := lintIn(t, dir, src, WithRoot(filepath.Join(base, "a")))
	if len(probs) != 1 || probs[0].Line != 4 || !strings.Contains(probs[0].Message, "climbs above the root given") {
		t.Fatalf("got %v, want the given root to be the ceiling", probs)
	}
	escape := header + "workdir: ../..\nsteps:\n  - id: a\n    run: x\n    workdir: ../x\n"
	probs = lintIn(t, dir, escape, WithRoot(base))
	if len(probs) != 1 || probs[0].Line != 8 || !strings.Contains(probs[0].Message, "leaves the pipeline's root") {
		t.Fatalf("got %v, want the step workdir refused", probs)
	}
	p, err := Load(filepath.Join(dir, "p.yaml"), WithRoot(base))
	if err == nil || p != nil {
		t.Fatalf("Load = %v, %v", p, err)
	}
}

// TestPassEnv: passEnv names valid variables and never a signing secret.
func TestPassEnv(t *testing.T) {
	t.Parallel()
	src := header + "passEnv: [HTTPS_PROXY, GPUATTEST_PASSWORD]\nsteps:\n  - id: a\n    run: x\n    passEnv: [CUDA_CACHE_PATH, 1BAD, ACTIONS_ID_TOKEN_REQUEST_TOKEN, SIGSTORE_ID_TOKEN, COSIGN_PASSWORD]\n"
	got := problemsOf(t, src)
	want := []where{
		{4, 24, "GPUATTEST_PASSWORD is a signing secret: "},
		{8, 32, `invalid environment variable name "1BAD"`},
		{8, 38, "ACTIONS_ID_TOKEN_REQUEST_TOKEN is a sign"},
		{8, 70, "SIGSTORE_ID_TOKEN is a signing secret: n"},
		{8, 89, "COSIGN_PASSWORD is a signing secret: no "},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d: got %v, want %v", i, got[i], want[i])
		}
	}
	p, err := Parse("p.yaml", []byte(header+"passEnv: [HTTPS_PROXY]\nsteps:\n  - {id: a, run: x, passEnv: [CUDA_CACHE_PATH]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PassEnv) != 1 || len(p.Steps[0].PassEnv) != 1 {
		t.Errorf("passEnv not decoded: %v %v", p.PassEnv, p.Steps[0].PassEnv)
	}
}
