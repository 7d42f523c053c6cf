package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// pipeCase is one hostile pipeline (and the files beside it): lint must
// answer lintExit and run runExit, each output matching its pattern;
// nothing outside the case's project and run directory may change.
type pipeCase struct {
	name     string
	yaml     string
	files    map[string]string // more files in the project, by relative path
	lintExit int
	lintWant string // regexp the lint output must match
	runExit  int
	runWant  string   // regexp the run output must match
	gone     []string // paths under the run directory that must not exist
	private  []string // paths under the run directory that must be 0400
	// lintOnly cases run lint alone, which may answer ok (0) or list
	// positioned problems (1).
	lintOnly bool
}

const pipeHead = "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: hostile\nsteps:\n"

// refusedAt is what lint prints for a problem at a position of p.yaml.
const refusedAt = `p\.yaml:\d+:\d+: `

// resultsJSON is a results file of the given cases (JSON objects).
func resultsJSON(cases ...string) string {
	return `{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[` + strings.Join(cases, ",") + `]}`
}

// testStep is a test step that writes body to r.json (or junit.xml) and
// reads it as its results.
func testStep(file, body string) string {
	return fmt.Sprintf("  - id: t\n    kind: test\n    run: cat payload > %s\n    results: %s\n", file, file)
}

// lintCases are pipelines lint refuses, with a position.
func lintCases() []pipeCase {
	bomb := "x0: &x0 [a, a, a, a, a, a, a, a, a, a]\n"
	for i := 1; i < 9; i++ {
		bomb += fmt.Sprintf("x%d: &x%d [*x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	var block strings.Builder
	block.WriteString(pipeHead + "  - id: a\n    run: echo\n    env:\n")
	for i := 3; block.Len() < 1_000_000; i++ {
		block.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	steps := func(s string) string { return pipeHead + s }
	run := "    run: echo\n"
	cs := []pipeCase{
		{name: "alias bomb (10^9 nodes)", yaml: pipeHead + "  - id: a\n" + run + bomb},
		{name: "alias to a step list", yaml: "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: h\ns: &s\n  - id: a\n    run: echo\nsteps: *s\n"},
		{name: "50,000 nested flow sequences", yaml: pipeHead + "  - id: a\n    run: " + strings.Repeat("[", 50_000) + strings.Repeat("]", 50_000) + "\n"},
		{name: "nested flow mappings (244 KB)", yaml: pipeHead + "  - id: a\n    run: " + strings.Repeat("{a: ", 61_000) + "b" + strings.Repeat("}", 61_000) + "\n"},
		{name: "1 MB of nested block mappings", yaml: block.String()},
		{name: "10 MB pipeline (a long comment)", yaml: pipeHead + "  - id: a\n" + run + "# " + strings.Repeat("x", 10<<20) + "\n", lintWant: `p\.yaml.*(larger|limit|MiB)`},
		{name: "10 MB pipeline (100k steps)", yaml: pipeHead + strings.Repeat("  - id: a\n    run: echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", 10<<20/90), lintWant: `p\.yaml.*(larger|limit|MiB)`},
		{name: "non-UTF-8 step id", yaml: steps("  - id: a\xff\xfe\n" + run)},
		{name: "non-UTF-8 in a run string", yaml: steps("  - id: a\n    run: echo \xc3\x28\n")},
		{name: "terminal escape in a step id", yaml: steps("  - id: \"a\\e[2K\\e[1APASS\"\n" + run)},
		{name: "bidi override in a step id", yaml: steps("  - id: \"a\u202eb\"\n" + run)},
		{name: "step id ../x", yaml: steps("  - id: ../x\n" + run)},
		{name: "step id a/b", yaml: steps("  - id: a/b\n" + run)},
		{name: "step id /abs", yaml: steps("  - id: /abs\n" + run)},
		{name: "step id ..", yaml: steps("  - id: ..\n" + run)},
		{name: "unicode step id", yaml: steps("  - id: ステップ\n" + run)},
		{name: "10,000-character step id", yaml: steps("  - id: " + strings.Repeat("a", 10_000) + "\n" + run)},
		{name: "duplicate step ids", yaml: steps("  - id: a\n" + run + "  - id: a\n" + run)},
		{name: "duplicate key in a step", yaml: steps("  - id: a\n" + run + run)},
		{name: "two YAML documents", yaml: steps("  - id: a\n"+run) + "---\n" + steps("  - id: b\n"+run)},
		{name: "!!binary tag", yaml: steps("  - id: a\n    run: !!binary ZWNobyBoaQ==\n")},
		{name: "step workdir ../outside", yaml: steps("  - id: a\n    workdir: ../outside\n" + run)},
		{name: "step workdir climbing to /", yaml: steps("  - id: a\n    workdir: ../../../../../../../../../..\n" + run)},
		{name: "step workdir /etc", yaml: steps("  - id: a\n    workdir: /etc\n" + run)},
		{name: "pipeline workdir above the root", yaml: "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: h\nworkdir: ../..\nsteps:\n  - id: a\n" + run},
		{name: "input glob ../*", yaml: steps("  - id: a\n" + run + "    inputs: [\"../*\"]\n")},
		{name: "input glob /etc/*", yaml: steps("  - id: a\n" + run + "    inputs: [/etc/passwd]\n")},
		{name: "output glob sub/../../x", yaml: steps("  - id: a\n" + run + "    outputs: [\"sub/../../outside/victim.json\"]\n")},
		{name: "output glob **/../..", yaml: steps("  - id: a\n" + run + "    outputs: [\"**/../../*\"]\n")},
		{name: "results /abs/victim.json", yaml: steps("  - id: t\n    kind: test\n" + run + "    results: /tmp/victim.json\n")},
		{name: "results ../outside/victim.json", yaml: steps("  - id: t\n    kind: test\n" + run + "    results: ../outside/victim.json\n")},
		{name: "baseline ../outside/b.json", yaml: steps("  - id: b\n    kind: benchmark\n" + run + "    results: r.json\n    baseline: ../outside/b.json\n")},
		{name: "cuda-build source ../outside/k.cu", yaml: "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: h\ntargets: [sm_80]\nsteps:\n  - id: k\n    kind: cuda-build\n    sources: [../outside/k.cu]\n"},
		{name: "cuda-build outDir ../outside", yaml: "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: h\ntargets: [sm_80]\nsteps:\n  - id: k\n    kind: cuda-build\n    sources: [k.cu]\n    outDir: ../outside\n"},
	}
	for i := range cs {
		cs[i].lintExit, cs[i].runExit = 1, 2
		if cs[i].lintWant == "" {
			cs[i].lintWant = refusedAt
		} else {
			cs[i].lintExit = 2 // over a limit: not read, so no problems to list
		}
		cs[i].runWant = cs[i].lintWant
	}
	return cs
}

// runCases are pipelines lint accepts whose steps leave hostile files:
// the step fails with a message naming the file, and gpuattest copies
// and writes nothing outside the run directory.
func runCases() []pipeCase {
	nan := resultsJSON(`{"name":"a","status":"passed","metrics":{"x":NaN}}`)
	dup := `{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[{"name":"a","status":"failed","status":"passed"}]}`
	var huge strings.Builder
	huge.WriteString(`{"schema":"https://gpuattest.dev/results/v1","tool":"t","backend":"cpu","cases":[`)
	for i := 0; huge.Len() < 9_000_000; i++ {
		if i > 0 {
			huge.WriteByte(',')
		}
		fmt.Fprintf(&huge, `{"name":"c%d","status":"passed"}`, i)
	}
	huge.WriteString("]}")
	lol := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
		`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;"><!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>` +
		`<testsuite name="s" tests="1" failures="0"><testcase name="&lol9;"/></testsuite>`
	twoRoots := `<testsuite name="s" tests="1" failures="0"><testcase name="a"/></testsuite><testsuite name="s2" tests="1" failures="1"><testcase name="b"><failure message="x"/></testcase></testsuite>`
	test := func(file, body string) (string, map[string]string) {
		return pipeHead + testStep(file, body), map[string]string{"payload": body}
	}
	type rc struct {
		name, file, body, want string
		exit                   int
	}
	var cs []pipeCase
	for _, c := range []rc{
		{"results with NaN", "r.json", nan, `r\.json:\d+:\d+`, 1},
		{"results with Infinity", "r.json", strings.Replace(nan, "NaN", "Infinity", 1), `r\.json:\d+:\d+`, 1},
		{"results with 1e999", "r.json", strings.Replace(nan, "NaN", "1e999", 1), `r\.json`, 1},
		{"results with a duplicate key (failed, then passed)", "r.json", dup, `r\.json:\d+:\d+: .*appears twice`, 1},
		{"results with a duplicate case name", "r.json", resultsJSON(`{"name":"a","status":"failed"}`, `{"name":"a","status":"passed"}`), `r\.json: cases\[1\]\.name: "a" repeats cases\[0\]`, 1},
		{"results: 9 MB, 300k cases", "r.json", huge.String(), ``, 0},
		{"results nested 100k deep", "r.json", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), `r\.json`, 1},
		{"JUnit with entity expansion", "junit.xml", lol, `junit\.xml`, 1},
		{"JUnit with two roots", "junit.xml", twoRoots, `junit\.xml.*(root|element)`, 1},
	} {
		y, files := test(c.file, c.body)
		cs = append(cs, pipeCase{name: c.name, yaml: y, files: files, runExit: c.exit, runWant: c.want})
	}
	cs = append(cs,
		pipeCase{name: "output symlink to a file outside the root", yaml: pipeHead + "  - id: a\n    run: ln -sf ../outside/victim.json out.json\n    outputs: [out.json]\n",
			runExit: 1, runWant: `out\.json`, gone: []string{"steps/a/outputs/out.json"}},
		pipeCase{name: "output symlink to a directory outside the root", yaml: pipeHead + "  - id: a\n    run: ln -sfn ../outside d\n    outputs: [\"d/**\"]\n",
			runExit: 1, runWant: `\bd\b`, gone: []string{"steps/a/outputs/d"}},
		pipeCase{name: "results symlink to a passing file outside the root", yaml: pipeHead + "  - id: t\n    kind: test\n    run: ln -sf ../outside/passed.json r.json\n    results: r.json\n",
			runExit: 1, runWant: `r\.json`},
		pipeCase{name: "a 0600 output stays private (0400), never 0444", yaml: pipeHead + "  - id: a\n    run: echo k > secret.key; chmod 600 secret.key\n    outputs: [secret.key]\n",
			runExit: 0, private: []string{"steps/a/outputs/secret.key"}},
		pipeCase{name: "input symlink outside the root", yaml: pipeHead + "  - id: a\n    run: echo\n    inputs: [in.txt]\n", files: map[string]string{"in.txt@": "../outside/victim.json"},
			runExit: 1, runWant: `in\.txt`},
	)
	for i := range cs {
		cs[i].lintExit = 0
	}
	return cs
}

// mutatedSeed is a valid pipeline the mutated cases start from.
const mutatedSeed = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: mutated
targets: [sm_80, sm_90]
env: {A: "1"}
steps:
  - id: kernels
    kind: cuda-build
    sources: [k.cu]
    flags: [-O3]
  - id: harness
    run: [sh, -c, "echo hi > h.txt"]
    inputs: ["*.cu"]
    outputs: [h.txt]
  - id: validate
    kind: test
    needs: [kernels, harness]
    run: ./h --out r.json
    results: r.json
    timeout: 10m
  - id: bench
    kind: benchmark
    needs: [validate]
    run: ./h --bench
    results: b.json
    repeats: auto
    gate: {threshold: 5%, alpha: 0.01}
`

// mutatedCases are seeded random byte edits of a valid pipeline (flips,
// control and non-ASCII bytes, deletions, duplicated spans): lint answers
// each with ok or problems, every problem positioned, never a crash.
func mutatedCases(l *lab) []pipeCase {
	rng := l.rng("pipelines")
	junk := []string{"\x00", "\x1b[2K", "\xff", "\u202e", ":", "[", "{", "&a", "*a", "!!str ", "\t", "\n", "'", "\"", "../", "-"}
	var cs []pipeCase
	for k := range l.n(25, 300) {
		b := []byte(mutatedSeed)
		var what []string
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b))
			switch rng.IntN(4) {
			case 0:
				b[i] ^= 1 << rng.IntN(8)
				what = append(what, fmt.Sprintf("flip@%d", i))
			case 1:
				j := junk[rng.IntN(len(junk))]
				b = append(b[:i], append([]byte(j), b[i:]...)...)
				what = append(what, fmt.Sprintf("insert %q@%d", j, i))
			case 2:
				n := min(1+rng.IntN(20), len(b)-i)
				b = append(b[:i], b[i+n:]...)
				what = append(what, fmt.Sprintf("delete %d@%d", n, i))
			default:
				n := min(1+rng.IntN(40), len(b)-i)
				b = append(b[:i], append(append([]byte(nil), b[i:i+n]...), b[i:]...)...)
				what = append(what, fmt.Sprintf("repeat %d@%d", n, i))
			}
		}
		cs = append(cs, pipeCase{name: fmt.Sprintf("mutated pipeline #%d (%s)", k, strings.Join(what, ", ")), yaml: string(b), lintOnly: true})
	}
	return cs
}

// pipelineCases runs the hostile pipelines.
func pipelineCases(ctx context.Context, l *lab) ([]result, error) {
	cs := append(append(lintCases(), runCases()...), mutatedCases(l)...)
	var out []result
	for i, c := range cs {
		r, err := l.pipeline(ctx, i, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// pipeline writes one case's project beside a sentinel tree, runs lint
// and run, and checks their answers and the tree.
func (l *lab) pipeline(ctx context.Context, i int, c pipeCase) (result, error) {
	dir := filepath.Join(l.dir, "pipelines", fmt.Sprintf("%03d", i))
	proj, outside := filepath.Join(dir, "proj"), filepath.Join(dir, "outside")
	files := map[string]string{
		filepath.Join(outside, "victim.json"): `{"host":"file"}`,
		filepath.Join(outside, "passed.json"): resultsJSON(`{"name":"a","status":"passed"}`),
		filepath.Join(outside, "b.json"):      "{}",
		filepath.Join(outside, "k.cu"):        "// host file\n",
		filepath.Join(outside, "hostsecret"):  "secret\n",
		filepath.Join(proj, "p.yaml"):         c.yaml,
		filepath.Join(proj, "k.cu"):           "extern \"C\" __global__ void k() {}\n",
	}
	for name, body := range c.files {
		if target, ok := strings.CutSuffix(name, "@"); ok {
			if err := os.MkdirAll(proj, 0o755); err != nil {
				return result{}, err
			}
			if err := os.Symlink(body, filepath.Join(proj, target)); err != nil {
				return result{}, err
			}
			continue
		}
		files[filepath.Join(proj, name)] = body
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return result{}, err
		}
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			return result{}, err
		}
	}
	defer os.RemoveAll(dir)
	before, err := snapshot(outside, l.home())
	if err != nil {
		return result{}, err
	}
	res := result{name: c.name, right: true}
	check := func(what string, exit int, want string, args ...string) error {
		u, out, err := l.call(ctx, proj, nil, args...)
		if err != nil {
			return err
		}
		res.usage.MaxRSS, res.usage.CPU = max(res.usage.MaxRSS, u.MaxRSS), max(res.usage.CPU, u.CPU)
		if !res.right {
			return nil
		}
		codes := []int{exit}
		if exit < 0 {
			codes = []int{0, 1}
			if u.Exit == 1 {
				want = refusedAt
			}
		}
		if ok, why := exitIn(u, out, codes...); !ok {
			res.right, res.why = false, what+": "+why
		} else if want != "" && !regexp.MustCompile(want).MatchString(out) {
			res.right, res.why = false, fmt.Sprintf("%s: output does not match %q%s", what, want, tail(out))
		} else if bad := unsafeText(out); bad != "" {
			res.right, res.why = false, what+": "+bad+tail(out)
		}
		return nil
	}
	if c.lintOnly {
		return res, check("lint", -1, "", "lint", "p.yaml")
	}
	if err := check("lint", c.lintExit, c.lintWant, "lint", "p.yaml"); err != nil {
		return result{}, err
	}
	runDir := filepath.Join(dir, "run")
	if err := check("run", c.runExit, c.runWant, "run", "p.yaml", "--out", runDir, "--no-cache"); err != nil {
		return result{}, err
	}
	for _, g := range c.gone {
		if _, err := os.Lstat(filepath.Join(runDir, g)); err == nil && res.right {
			res.right, res.why = false, "the run directory holds "+g
		}
	}
	for _, p := range c.private {
		st, err := os.Stat(filepath.Join(runDir, p))
		switch {
		case !res.right:
		case err != nil:
			res.right, res.why = false, err.Error()
		case st.Mode().Perm() != 0o400:
			res.right, res.why = false, fmt.Sprintf("%s: mode %v, want 0400", p, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(runDir); err == nil && c.runExit == 2 && res.right {
		res.right, res.why = false, "run wrote a run directory for an invalid pipeline"
	}
	after, err := snapshot(outside, l.home())
	if err != nil {
		return result{}, err
	}
	if d := diffSnapshots(before, after); d != "" && res.right {
		res.right, res.why = false, "changed outside the run directory: "+d
	}
	return res, nil
}

// unsafeText says what in a command's output could drive a terminal: an
// escape or other control character, or invalid UTF-8.
func unsafeText(out string) string {
	if !utf8.ValidString(out) {
		return "output is not valid UTF-8 (a raw byte from the input)"
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return fmt.Sprintf("output holds the raw control character %U", r)
		}
	}
	return ""
}

func (l *lab) home() string {
	for _, kv := range l.env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			return h
		}
	}
	return ""
}

// snapshot maps every path under roots (but the cache, which runs may
// fill) to its type, mode and content digest.
func snapshot(roots ...string) (map[string]string, error) {
	m := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == ".cache" {
				return filepath.SkipDir
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			v := info.Mode().String()
			switch {
			case info.Mode().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				sum := sha256.Sum256(b)
				v += " " + hex.EncodeToString(sum[:8])
			case info.Mode()&fs.ModeSymlink != 0:
				t, _ := os.Readlink(p)
				v += " -> " + t
			}
			m[p] = v
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// diffSnapshots names the first few paths that differ.
func diffSnapshots(a, b map[string]string) string {
	var d []string
	for p, v := range a {
		if w, ok := b[p]; !ok {
			d = append(d, p+" removed")
		} else if v != w {
			d = append(d, p+" changed")
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			d = append(d, p+" added")
		}
	}
	if len(d) > 5 {
		d = append(d[:5], fmt.Sprintf("and %d more", len(d)-5))
	}
	return strings.Join(d, ", ")
}
