package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/rusage"
)

// Goals of issue 14 for inputs of at most 10 MB: verify answers within
// these, and a 10 MB predicate verifies in a second.
const (
	goalRSS = 256 << 10 // KiB
	goalCPU = 2 * time.Second
)

// hostileCase is one gpuattest verify call on a hostile or large input.
type hostileCase struct {
	Name     string
	InputMB  float64 // size of the hostile input
	Args     []string
	WantExit int
}

// hostileFixture writes the inputs of the hostile cases into dir.
type hostileFixture struct {
	dir    string
	signer *sign.Signer
	digest string // of k.bin, the one artifact
}

// validationBundle signs a passing validation statement whose predicate
// is about size bytes (many passed steps) and writes it to name.
func (f *hostileFixture) validationBundle(ctx context.Context, name string, size int) (float64, error) {
	st, err := statement("k.bin", f.digest)
	if err != nil {
		return 0, err
	}
	var pred map[string]any
	if err := json.Unmarshal(st.Predicate, &pred); err != nil {
		return 0, err
	}
	steps, _ := pred["steps"].([]any)
	for i := 0; len(st.Predicate) < size; i++ {
		for range 1000 {
			steps = append(steps, map[string]any{"id": fmt.Sprintf("step-%07d", len(steps)), "kind": "test", "verdict": "passed", "runner": "host",
				"gpu": false, "backend": "cpu", "devices": []any{}})
		}
		pred["steps"] = steps
		if st.Predicate, err = json.Marshal(pred); err != nil {
			return 0, err
		}
	}
	b, err := f.signer.Sign(ctx, st)
	if err != nil {
		return 0, err
	}
	return float64(len(b)) / 1e6, os.WriteFile(filepath.Join(f.dir, name), b, 0o644)
}

func (f *hostileFixture) write(name string, b []byte) (float64, error) {
	return float64(len(b)) / 1e6, os.WriteFile(filepath.Join(f.dir, name), b, 0o644)
}

// policyFile writes a policy with the given rules (name: expr).
func (f *hostileFixture) policyFile(name string, rules ...string) (float64, error) {
	var b strings.Builder
	b.WriteString("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n")
	for i, r := range rules {
		fmt.Fprintf(&b, "  - name: r%d\n    expr: '%s'\n", i, r)
	}
	return f.write(name, []byte(b.String()))
}

func (f *hostileFixture) cases(ctx context.Context) ([]hostileCase, error) {
	var cs []hostileCase
	verify := func(bundle string, extra ...string) []string {
		return append([]string{"verify", "--bundle", bundle, "--key", "key.pub"}, extra...)
	}
	add := func(name string, mb float64, err error, want int, args []string) error {
		cs = append(cs, hostileCase{Name: name, InputMB: mb, Args: args, WantExit: want})
		return err
	}
	_, err := f.validationBundle(ctx, "small.json", 0)
	errs := []error{err}
	for _, sz := range []int{2, 10} {
		mb, err := f.validationBundle(ctx, fmt.Sprintf("pred%d.json", sz), sz*1_000_000)
		errs = append(errs, add(fmt.Sprintf("predicate %d MB, default policy", sz), mb, err, 0, verify(fmt.Sprintf("pred%d.json", sz), "k.bin")))
	}
	mb, err := f.validationBundle(ctx, "pred21.json", 21_000_000)
	errs = append(errs, add("predicate 21 MB (over the limit)", mb, err, 1, verify("pred21.json", "k.bin")))
	errs = append(errs, add("predicate 21 MB, limit raised to 32MiB", mb, nil, 0, verify("pred21.json", "--max-predicate-size", "32MiB", "k.bin")))
	mb, err = f.write("junk.json", bytes.Repeat([]byte("x"), 10_000_000))
	errs = append(errs, add("bundle: 10 MB not JSON", mb, err, 10, verify("junk.json", "k.bin")))
	mb, err = f.write("deep.json", []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","x":`+strings.Repeat("[", 5_000_000)+strings.Repeat("]", 5_000_000)+"}"))
	errs = append(errs, add("bundle: 10 MB nested arrays", mb, err, 10, verify("deep.json", "k.bin")))
	one, _ := os.ReadFile(filepath.Join(f.dir, "small.json"))
	lines := bytes.Repeat(append(bytes.TrimSpace(one), '\n'), 10_000_000/(len(one)+1))
	mb, err = f.write("many.jsonl", lines)
	errs = append(errs, add(fmt.Sprintf("JSONL: %d valid bundles", bytes.Count(lines, []byte("\n"))), mb, err, 0, verify("many.jsonl", "k.bin")))
	mb, err = f.write("tampered.jsonl", bytes.ReplaceAll(lines, []byte(`"payload":"`), []byte(`"payload":"AA`)))
	errs = append(errs, add("JSONL: the same, payloads tampered", mb, err, 10, verify("tampered.jsonl", "k.bin")))
	mb, err = f.write("flow.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules: "+strings.Repeat("[", 500_000)+strings.Repeat("]", 500_000)+"\n"))
	errs = append(errs, add("policy: 1 MB of nested flow sequences", mb, err, 1, verify("small.json", "--policy", "flow.yaml", "k.bin")))
	mb, err = f.write("big.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\n# "+strings.Repeat("x", 10_000_000)+"\nrules:\n  - name: a\n    expr: 'true'\n"))
	errs = append(errs, add("policy: 10 MB", mb, err, 1, verify("small.json", "--policy", "big.yaml", "k.bin")))
	mb, err = f.write("multi.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: a\n    expr: 'true'\n---\napiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: b\n    expr: '!predicate.simulated'\n"))
	errs = append(errs, add("policy: two documents", mb, err, 1, verify("small.json", "--policy", "multi.yaml", "k.bin")))
	bomb := "apiVersion: gpuattest.dev/v1\nkind: Policy\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i < 10; i++ {
		bomb += fmt.Sprintf("a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	mb, err = f.write("bomb.yaml", []byte(bomb+"rules:\n  - name: a\n    expr: 'true'\n"))
	errs = append(errs, add("policy: alias bomb (10^10 nodes)", mb, err, 1, verify("small.json", "--policy", "bomb.yaml", "k.bin")))
	var deep strings.Builder
	deep.WriteString("apiVersion: gpuattest.dev/v1\nkind: Policy\nx:\n")
	for i := 1; deep.Len() < 1_000_000; i++ {
		deep.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	mb, err = f.write("deepblock.yaml", []byte(deep.String()))
	errs = append(errs, add("policy: 1 MB of nested mappings", mb, err, 1, verify("small.json", "--policy", "deepblock.yaml", "k.bin")))
	var rules []string
	for i := 0; i < 11_000; i++ {
		rules = append(rules, fmt.Sprintf(`predicate.steps.all(s, s.verdict in ["passed", "%d"])`, i))
	}
	mb, err = f.policyFile("manyrules.yaml", rules...)
	errs = append(errs, add(fmt.Sprintf("policy: %d rules", len(rules)), mb, err, 1, verify("small.json", "--policy", "manyrules.yaml", "k.bin")))
	rules = rules[:0]
	for i := range 256 {
		var alts []string
		for j := 0; len(strings.Join(alts, " || ")) < 1990; j++ {
			alts = append(alts, fmt.Sprintf(`predicate.result == "r%d-%d"`, i, j))
		}
		rules = append(rules, strings.Join(alts, " || ")+` || predicate.result == "passed"`)
	}
	mb, err = f.policyFile("longrules.yaml", rules...)
	errs = append(errs, add(fmt.Sprintf("policy: %d rules of 2 KB", len(rules)), mb, err, 0, verify("small.json", "--policy", "longrules.yaml", "k.bin")))
	mb, err = f.policyFile("nested.yaml", `predicate.steps.all(a, predicate.steps.all(b, predicate.steps.exists(c, c.id == a.id || c.id == b.id)))`)
	errs = append(errs, add("policy: nested all/all/exists over 2 MB", mb, err, 1, verify("pred2.json", "--policy", "nested.yaml", "k.bin")))
	return cs, errors.Join(errs...)
}

// writeHostileFixtures writes the inputs of the hostile cases into dir
// and their list to dir/cases.json. It runs in a process of its own: a
// child started by a process that once used much memory inherits that
// peak in its ru_maxrss, and the inputs take hundreds of MB to make.
func writeHostileFixtures(dir string) error {
	f := &hostileFixture{dir: dir}
	kp, err := benchKey(dir)
	if err != nil {
		return err
	}
	if f.signer, err = sign.NewKeySigner(kp, sign.WithMaxStatementSize(64<<20)); err != nil {
		return err
	}
	content := []byte("kernel bytes")
	sum := sha256.Sum256(content)
	f.digest = hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, "k.bin"), content, 0o644); err != nil {
		return err
	}
	cases, err := f.cases(context.Background())
	if err != nil {
		return err
	}
	b, err := json.Marshal(cases)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cases.json"), b, 0o644)
}

// runHostile runs gpuattest verify on hostile and large inputs and prints
// exit code, wall and CPU time and peak RSS per case; it fails when a
// case exits otherwise than expected or an input of at most 10 MB
// breaks the goals.
func runHostile(ctx context.Context, bin, dir string, env []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, self, "-hostile-fixtures", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("writing the inputs: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		return err
	}
	var cases []hostileCase
	if err := json.Unmarshal(b, &cases); err != nil {
		return err
	}
	fmt.Printf("gpuattest verify on hostile and large inputs; goals for inputs ≤ 10 MB: peak RSS ≤ %d MiB, CPU ≤ %s\n\n", goalRSS>>10, goalCPU)
	fmt.Printf("%-42s %8s %5s %9s %9s %10s  %s\n", "case", "input", "exit", "wall", "cpu", "peak RSS", "verdict")
	var bad []string
	for _, c := range cases {
		u, out, err := measureCall(ctx, dir, env, append([]string{bin}, c.Args...))
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		verdict := "ok"
		switch {
		case u.Exit != c.WantExit:
			verdict = fmt.Sprintf("WRONG: exit %d, want %d", u.Exit, c.WantExit)
		case c.InputMB <= 10.5 && (u.MaxRSS > goalRSS || u.CPU > goalCPU):
			verdict = "OVER THE GOAL"
		}
		if verdict != "ok" {
			bad = append(bad, c.Name+": "+verdict+"\n"+out[max(0, len(out)-600):])
		}
		fmt.Printf("%-42s %6.1fMB %5d %9s %9s %6.1f MiB  %s\n", c.Name, c.InputMB, u.Exit,
			u.Wall.Round(time.Millisecond), u.CPU.Round(time.Millisecond), float64(u.MaxRSS)/1024, verdict)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d case(s) failed:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	return nil
}

// measureCall runs argv in dir, for at most ten minutes.
func measureCall(ctx context.Context, dir string, env []string, argv []string) (rusage.Usage, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	u, out, err := rusage.Run(ctx, dir, env, argv...)
	return u, string(out), err
}
