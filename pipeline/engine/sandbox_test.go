package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// hostile is a pipeline root with a host directory beside it that no step
// may reach: host/secret.txt.
type hostile struct {
	root, host, secret, out, cache string
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	base := t.TempDir()
	h := &hostile{
		root:  filepath.Join(base, "proj"),
		host:  filepath.Join(base, "hostsecret"),
		out:   filepath.Join(base, "run"),
		cache: filepath.Join(base, "cache"),
	}
	h.secret = filepath.Join(h.host, "secret.txt")
	for _, d := range []string{h.root, h.host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(h.secret, []byte("host-only secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// unchanged fails the test when the host directory holds anything but the
// secret, unchanged.
func (h *hostile) unchanged(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(h.host)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret.txt" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the host directory changed: %v", names)
	}
	if b, err := os.ReadFile(h.secret); err != nil || string(b) != "host-only secret\n" {
		t.Errorf("the host secret changed: %q %v", b, err)
	}
}

// noSecretIn fails when the secret's text is in any file under dir.
func noSecretIn(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "host-only secret") {
			t.Errorf("%s holds the host secret", p)
		}
		return nil
	})
}

// TestWorkdirEscapeRefusedAtRun: a step workdir outside the root (which
// lint refuses) and one that leaves it through a symlink (which lint
// cannot see) both error at run time; nothing runs there.
func TestWorkdirEscapeRefusedAtRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		workdir string
		link    bool
	}{
		{"dotdot", "../hostsecret", false},
		{"to the file system root", "../../../../../../../../../../..", false},
		{"through a symlink", "link", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHostile(t)
			if tt.link {
				if err := os.Symlink(h.host, filepath.Join(h.root, "link")); err != nil {
					t.Fatal(err)
				}
			}
			p := load(t, "steps:\n  - {id: a, run: 'cat secret.txt; echo pwned > pwned.txt'}\n")
			p.Dir, p.Root = h.root, h.root
			p.Steps[0].Workdir = tt.workdir // past lint, as a library caller could
			res, err := Run(t.Context(), p, WithOutDir(h.out), WithoutCache())
			if err != nil {
				t.Fatal(err)
			}
			st := res.Record.Step("a")
			if st.State != runtypes.Error || !strings.Contains(st.Reason, "outside the pipeline's root") {
				t.Errorf("step a: %s %q, want an error saying the workdir is outside the root", st.State, st.Reason)
			}
			h.unchanged(t)
			noSecretIn(t, h.out)
		})
	}
}

// TestOutputSymlinks: an output symlink whose target leaves the step's
// workdir is an error naming the link, and nothing of the target reaches
// the run directory or the cache; a link inside is recorded as a link.
func TestOutputSymlinks(t *testing.T) {
	t.Parallel()
	t.Run("to a host file", func(t *testing.T) {
		t.Parallel()
		h := newHostile(t)
		p := load(t, "steps:\n  - {id: a, run: 'ln -sf \""+h.secret+"\" leak.txt', outputs: [leak.txt]}\n")
		p.Dir, p.Root = h.root, h.root
		res, err := Run(t.Context(), p, WithOutDir(h.out), WithCacheDir(h.cache))
		if err != nil {
			t.Fatal(err)
		}
		st := res.Record.Step("a")
		if st.State == runtypes.Passed || !strings.Contains(st.Reason, "leak.txt") || !strings.Contains(st.Reason, "outside the step's workdir") {
			t.Errorf("step a: %s %q, want a failure naming leak.txt", st.State, st.Reason)
		}
		noSecretIn(t, h.out)
		noSecretIn(t, h.cache)
		h.unchanged(t)
	})
	t.Run("through a directory link", func(t *testing.T) {
		t.Parallel()
		h := newHostile(t)
		p := load(t, "steps:\n  - {id: a, run: 'ln -sfn \""+h.host+"\" out', outputs: ['out/*']}\n")
		p.Dir, p.Root = h.root, h.root
		res, err := Run(t.Context(), p, WithOutDir(h.out), WithCacheDir(h.cache))
		if err != nil {
			t.Fatal(err)
		}
		if st := res.Record.Step("a"); st.State == runtypes.Passed || !strings.Contains(st.Reason, "outside the step's workdir") {
			t.Errorf("step a: %s %q, want a failure", st.State, st.Reason)
		}
		noSecretIn(t, h.out)
		noSecretIn(t, h.cache)
		h.unchanged(t)
	})
	t.Run("in a matched directory", func(t *testing.T) {
		t.Parallel()
		h := newHostile(t)
		p := load(t, "steps:\n  - {id: a, run: 'mkdir -p build && echo x > build/ok && ln -sf \""+h.secret+"\" build/leak', outputs: [build]}\n")
		p.Dir, p.Root = h.root, h.root
		res, err := Run(t.Context(), p, WithOutDir(h.out), WithCacheDir(h.cache))
		if err != nil {
			t.Fatal(err)
		}
		if st := res.Record.Step("a"); st.State == runtypes.Passed || !strings.Contains(st.Reason, "build/leak") {
			t.Errorf("step a: %s %q, want a failure naming build/leak", st.State, st.Reason)
		}
		noSecretIn(t, h.out)
		noSecretIn(t, h.cache)
	})
	t.Run("an input to a host file", func(t *testing.T) {
		t.Parallel()
		h := newHostile(t)
		if err := os.Symlink(h.secret, filepath.Join(h.root, "in.txt")); err != nil {
			t.Fatal(err)
		}
		p := load(t, "steps:\n  - {id: a, run: 'true', inputs: [in.txt], outputs: [in.txt]}\n")
		p.Dir, p.Root = h.root, h.root
		res, err := Run(t.Context(), p, WithOutDir(h.out), WithCacheDir(h.cache))
		if err != nil {
			t.Fatal(err)
		}
		if st := res.Record.Step("a"); st.State == runtypes.Passed || !strings.Contains(st.Reason, `inputs[0] "in.txt": in.txt is a symlink to`) {
			t.Errorf("step a: %s %q, want a failure naming in.txt", st.State, st.Reason)
		}
		noSecretIn(t, h.out)
		noSecretIn(t, h.cache)
	})
	t.Run("inside is recorded as a link", func(t *testing.T) {
		t.Parallel()
		h := newHostile(t)
		p := load(t, "steps:\n  - {id: a, run: 'echo hi > a.txt && ln -sf a.txt b.txt', outputs: [a.txt, b.txt]}\n")
		p.Dir, p.Root = h.root, h.root
		res, err := Run(t.Context(), p, WithOutDir(h.out), WithoutCache())
		if err != nil {
			t.Fatal(err)
		}
		st := res.Record.Step("a")
		if st.State != runtypes.Passed {
			t.Fatalf("step a: %s %q", st.State, st.Reason)
		}
		fi, err := os.Lstat(filepath.Join(h.out, "steps", "a", "outputs", "b.txt"))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("outputs/b.txt is not a symlink: %v %v", fi, err)
		}
		if l, _ := os.Readlink(filepath.Join(h.out, "steps", "a", "outputs", "b.txt")); l != "a.txt" {
			t.Errorf("outputs/b.txt -> %q, want a.txt", l)
		}
	})
}

// TestCacheRestoreStaysInside: a cached output is restored through the
// work dir, never through a symlink that a later step (or user) put in
// place of its directory.
func TestCacheRestoreStaysInside(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	p := load(t, "steps:\n  - {id: a, run: 'mkdir -p build && [ ! -L build ] && echo built > build/x', outputs: [build/x]}\n")
	p.Dir, p.Root = h.root, h.root
	res, err := Run(t.Context(), p, WithOutDir(h.out), WithCacheDir(h.cache))
	if err != nil || !res.Passed() {
		t.Fatalf("first run: %v %+v", err, res.Record.Step("a"))
	}
	if err := os.RemoveAll(filepath.Join(h.root, "build")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.host, filepath.Join(h.root, "build")); err != nil {
		t.Fatal(err)
	}
	res, err = Run(t.Context(), p, WithOutDir(h.out+"2"), WithCacheDir(h.cache))
	if err != nil {
		t.Fatal(err)
	}
	st := res.Record.Step("a")
	if !slices.ContainsFunc(st.Notes, func(n string) bool { return strings.HasPrefix(n, "cache entry unusable") }) {
		t.Errorf("second run: %s %q %v, want the cache entry refused", st.State, st.Reason, st.Notes)
	}
	h.unchanged(t)
}

// TestLinkOutputsCachedAndResumed: an output recorded as a link is cached
// and restored as the same link, and resume compares the link itself.
func TestLinkOutputsCachedAndResumed(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	p := load(t, "steps:\n  - {id: a, run: 'mkdir -p out && echo hi > out/a && ln -sfn a out/b', outputs: ['out/*']}\n")
	p.Dir, p.Root = h.root, h.root
	res, err := Run(t.Context(), p, WithOutDir(h.out), WithCacheDir(h.cache))
	if err != nil || !res.Passed() {
		t.Fatalf("first run: %v %+v", err, res.Record.Step("a"))
	}
	var link *step.File
	for i, f := range res.Record.Step("a").Outputs {
		if f.Path == "out/b" {
			link = &res.Record.Step("a").Outputs[i]
		}
	}
	if link == nil || link.Link != "a" {
		t.Fatalf("out/b recorded as %+v, want a link to a", link)
	}
	os.RemoveAll(filepath.Join(h.root, "out"))
	res, err = Run(t.Context(), p, WithOutDir(h.out+"2"), WithCacheDir(h.cache))
	if err != nil || !res.Passed() || res.Record.Step("a").Cache != "hit" {
		t.Fatalf("second run: %v %+v", err, res.Record.Step("a"))
	}
	if l, err := os.Readlink(filepath.Join(h.root, "out", "b")); err != nil || l != "a" {
		t.Errorf("restored out/b: %q %v, want a link to a", l, err)
	}
	if l, err := os.Readlink(filepath.Join(h.out+"2", "steps", "a", "outputs", "out", "b")); err != nil || l != "a" {
		t.Errorf("run directory's out/b: %q %v, want a link to a", l, err)
	}
	// A resume keeps the step while the link is unchanged, and re-runs it
	// once the link points elsewhere.
	res, err = Run(t.Context(), p, WithResume(h.out+"2"), WithCacheDir(h.cache))
	if err != nil || !res.Passed() || len(res.Record.Attempts[1].Reran) != 0 {
		t.Fatalf("resume: %v %+v", err, res.Record.Attempts)
	}
	os.Remove(filepath.Join(h.root, "out", "b"))
	os.Symlink("elsewhere", filepath.Join(h.root, "out", "b"))
	res, err = Run(t.Context(), p, WithResume(h.out+"2"), WithCacheDir(h.cache))
	if err != nil || len(res.Record.Attempts[2].Reran) != 1 || !strings.Contains(res.Record.Attempts[2].Reran[0], `out/b changed since it was recorded (link "a", now "elsewhere")`) {
		t.Fatalf("resume after the link changed: %v %+v", err, res.Record.Attempts)
	}
}

// containerRunner runs commands on this machine under a container
// runner's name, so that the engine gives its steps a container's
// environment; the image is not used.
type containerRunner struct{ name string }

func (c containerRunner) Name() string { return c.name }

func (c containerRunner) Run(ctx context.Context, cmd *runner.Command) (*runner.Result, error) {
	cp := *cmd
	cp.Image = image.Pinned{}
	return (&runner.Host{}).Run(ctx, &cp)
}

// TestContainerStepsGetMinimalEnv: docker and bwrap steps get the step's
// env, the pipeline's env, the host variables passEnv names and
// GPUATTEST_* facts; never the rest of the host environment, and never a
// signing secret.
func TestContainerStepsGetMinimalEnv(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"docker", "bwrap"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHostile(t)
			p := load(t, "images: {img: x@sha256:"+strings.Repeat("0", 64)+"}\nenv: {PIPE: p}\npassEnv: [HTTPS_PROXY]\nsteps:\n"+
				"  - {id: a, runner: "+name+", image: img, env: {STEP: s}, passEnv: [CUDA_CACHE_PATH], run: ['/usr/bin/env']}\n")
			p.Dir, p.Root = h.root, h.root
			p.PassEnv = append(p.PassEnv, "GPUATTEST_PASSWORD") // past lint: still never passed
			base := []string{"PATH=/usr/bin:/bin", "HOME=/root", "HTTPS_PROXY=http://proxy", "CUDA_CACHE_PATH=/c", "UNRELATED=1", "GPUATTEST_PASSWORD=hunter2"}
			res, err := Run(t.Context(), p, WithOutDir(h.out), WithoutCache(), WithBaseEnv(base), WithRunner(containerRunner{name}),
				WithImageResolver(func(_ context.Context, _, ref string) (image.Pinned, error) { return image.ParsePinned(ref) }))
			if err != nil || !res.Passed() {
				t.Fatalf("%v %+v", err, res.Record.Step("a"))
			}
			b, _ := os.ReadFile(filepath.Join(h.out, "steps", "a", "stdout.log"))
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				k, v, _ := strings.Cut(l, "=")
				if strings.HasPrefix(k, "GPUATTEST_") && k != "GPUATTEST_PASSWORD" {
					v = "..."
				}
				got = append(got, k+"="+v)
			}
			sort.Strings(got)
			want := []string{"CUDA_CACHE_PATH=/c", "GPUATTEST_RUN_DIR=...", "GPUATTEST_STEP_DIR=...", "GPUATTEST_STEP_ID=...", "GPUATTEST_TARGETS=...", "HTTPS_PROXY=http://proxy", "PIPE=p", "STEP=s"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("environment (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSigningSecretsNeverReachSteps: the host runner passes the host
// environment minus the signing secrets (key passwords, OIDC tokens).
func TestSigningSecretsNeverReachSteps(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	p := load(t, "steps:\n  - {id: a, run: 'env > env.txt'}\n")
	p.Dir, p.Root = h.root, h.root
	base := []string{
		"PATH=" + os.Getenv("PATH"), "KEEP=1",
		"GPUATTEST_PASSWORD=hunter2", "COSIGN_PASSWORD=hunter3", "SIGSTORE_ID_TOKEN=eyJtoken",
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN=ghtoken", "ACTIONS_ID_TOKEN_REQUEST_URL=https://token.example",
	}
	res, err := Run(t.Context(), p, WithOutDir(h.out), WithoutCache(), WithBaseEnv(base))
	if err != nil || !res.Passed() {
		t.Fatalf("%v %+v", err, res.Record.Step("a"))
	}
	b, err := os.ReadFile(filepath.Join(h.root, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	if !strings.Contains(env, "KEEP=1") {
		t.Errorf("the host environment did not reach the host step:\n%s", env)
	}
	for _, s := range []string{"GPUATTEST_PASSWORD", "COSIGN_PASSWORD", "SIGSTORE_ID_TOKEN", "ACTIONS_ID_TOKEN_REQUEST", "hunter", "eyJtoken", "ghtoken"} {
		if strings.Contains(env, s) {
			t.Errorf("the step saw %s:\n%s", s, env)
		}
	}
}
