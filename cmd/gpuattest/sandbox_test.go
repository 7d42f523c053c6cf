package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/internal/tinyimage"
)

// TestHostileBwrapPipeline runs the hostile pipelines of issue 14 against
// the bwrap runner with a tiny image from a docker-archive: file. Every
// path escape is refused by lint with its position and by run before any
// step; the escapes lint cannot see (a symlinked workdir, an output
// symlink) fail their step at run time. In every case nothing outside the
// root, the run directory and the cache changes, and the host secret
// reaches neither.
func TestHostileBwrapPipeline(t *testing.T) {
	testenv.RequireTool(t, "bwrap")
	base := t.TempDir()
	archive := filepath.Join(base, "images", "tiny.tar")
	tinyimage.WriteDockerArchive(t, archive)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(base, "cache"))
	host := filepath.Join(base, "hostsecret")
	outside := filepath.Join(base, "outside")
	root := filepath.Join(base, "proj")
	for _, d := range []string{host, outside, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(host, "secret.txt")
	victim := filepath.Join(outside, "victim.json")
	os.WriteFile(secret, []byte("host-only secret\n"), 0o600)
	os.WriteFile(victim, []byte("{}\n"), 0o644)
	if err := os.Symlink("../hostsecret", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../hostsecret/secret.txt", filepath.Join(root, "leak.txt")); err != nil {
		t.Fatal(err)
	}

	head := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: hostile\nrunner: bwrap\nimages:\n  tiny: docker-archive:../images/tiny.tar\nsteps:\n"
	write := func(name, steps string) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(head+steps), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cli := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := execute(args, strings.NewReader(""), &out, &out)
		return code, out.String()
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		for dir, want := range map[string][]string{host: {"secret.txt"}, outside: {"victim.json"}} {
			entries, _ := os.ReadDir(dir)
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("%s changed: %v", dir, got)
			}
		}
		if b, _ := os.ReadFile(secret); string(b) != "host-only secret\n" {
			t.Errorf("the secret changed: %q", b)
		}
		if b, _ := os.ReadFile(victim); string(b) != "{}\n" {
			t.Errorf("the victim changed: %q", b)
		}
		for _, dir := range []string{filepath.Join(base, "runs"), filepath.Join(base, "cache")} {
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("host-only secret")) {
						t.Errorf("%s holds the host secret", p)
					}
				}
				return nil
			})
		}
	}

	// The tiny image and the sandbox work: a step in the root runs, and
	// sees nothing above the root.
	// The environment is minimal: passEnv's variables, never a secret.
	t.Run("benign", func(t *testing.T) {
		t.Setenv("GPUATTEST_PASSWORD", "hunter2")
		t.Setenv("PASSED", "yes")
		t.Setenv("UNPASSED", "no")
		p := write("benign.yaml", "  - id: ok\n    image: tiny\n    passEnv: [PASSED]\n"+
			"    run: 'echo ok > ok.txt; echo \"$GPUATTEST_PASSWORD|$PASSED|$UNPASSED\" > env.txt; test ! -e ../hostsecret/secret.txt; test ! -e \""+secret+"\"'\n")
		code, out := cli("run", p, "--out", filepath.Join(base, "runs", "benign"), "-q")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if b, err := os.ReadFile(filepath.Join(root, "ok.txt")); err != nil || string(b) != "ok\n" {
			t.Errorf("ok.txt: %q %v", b, err)
		}
		if b, err := os.ReadFile(filepath.Join(root, "env.txt")); err != nil || string(b) != "|yes|\n" {
			t.Errorf("env.txt: %q %v, want only the passed variable", b, err)
		}
		unchanged(t)
	})

	lintRefused := []struct {
		name, steps, want string
	}{
		{"workdir to a host directory", "  - id: a\n    image: tiny\n    workdir: ../hostsecret\n    run: 'read l < secret.txt; echo \"$l\"; echo pwned > pwned.txt'\n",
			`:10:14: workdir "../hostsecret" leaves the pipeline's root`},
		{"workdir to the host's root", "  - id: a\n    image: tiny\n    workdir: ../../../../../../../..\n    run: 'true'\n",
			`:10:14: workdir "../../../../../../../.." leaves the pipeline's root`},
		{"absolute results", "  - id: t\n    kind: test\n    image: tiny\n    run: 'true'\n    results: " + victim + "\n",
			`:12:14: results "` + regexp.QuoteMeta(victim) + `" must be relative`},
		{"results above the root", "  - id: t\n    kind: test\n    image: tiny\n    run: 'true'\n    results: ../outside/victim.json\n",
			`:12:14: results "../outside/victim.json" leaves the step's workdir`},
		{"baseline above the root", "  - id: b\n    kind: benchmark\n    image: tiny\n    run: 'true'\n    results: r.json\n    baseline: ../outside/victim.json\n",
			`:13:15: baseline "../outside/victim.json" leaves the pipeline's root`},
	}
	for i, tt := range lintRefused {
		t.Run(tt.name, func(t *testing.T) {
			p := write("hostile.yaml", tt.steps)
			code, out := cli("lint", p)
			if code != 1 || !regexp.MustCompile(regexp.QuoteMeta(p)+tt.want).MatchString(out) {
				t.Errorf("lint: exit %d, output:\n%s\nwant exit 1 and %s%s", code, out, p, tt.want)
			}
			runDir := filepath.Join(base, "runs", "lint", string(rune('a'+i)))
			code, out = cli("run", p, "--out", runDir, "-q")
			if code != 2 || !strings.Contains(out, "nothing was run") {
				t.Errorf("run: exit %d, output:\n%s\nwant exit 2, nothing run", code, out)
			}
			if _, err := os.Stat(runDir); err == nil {
				t.Errorf("run created %s", runDir)
			}
			unchanged(t)
		})
	}

	runRefused := []struct {
		name, steps, want string
	}{
		{"workdir through a symlink", "  - id: a\n    image: tiny\n    workdir: link\n    run: 'read l < secret.txt; echo \"$l\"; echo pwned > pwned.txt'\n",
			"outside the pipeline's root"},
		{"output symlink to a host file", "  - id: a\n    image: tiny\n    run: 'true'\n    outputs: [leak.txt]\n",
			"leak.txt"},
	}
	for i, tt := range runRefused {
		t.Run(tt.name, func(t *testing.T) {
			p := write("hostile.yaml", tt.steps)
			if code, out := cli("lint", p); code != 0 {
				t.Fatalf("lint: exit %d:\n%s", code, out)
			}
			code, out := cli("run", p, "--out", filepath.Join(base, "runs", "run", string(rune('a'+i))), "-q")
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Errorf("run: exit %d, output:\n%s\nwant exit 1 and %q", code, out, tt.want)
			}
			unchanged(t)
		})
	}
}
