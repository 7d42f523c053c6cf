package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// signedCases (issue 21): a signature covers exactly what was checked. A
// header-only change is never a cache hit whose old fatbin is signed; a
// verify --vsa-out VSA never names a bundle the policy did not judge; a
// rebuild of a file holding two provenances is refused, and its VSA with
// an ARTIFACT names only the provenance rebuilt; a -ccbin script of the
// source run by rebuild cannot write outside the rebuild directory.
func signedCases(ctx context.Context, l *lab) ([]result, error) {
	dir := filepath.Join(l.dir, "signed")
	src := filepath.Join(dir, "src")
	outside := filepath.Join(dir, "outside")
	pipe := func(name, cu, extra string) string {
		return "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: " + name + "\ntargets: [sm_80]\nsteps:\n  - id: kernels\n    kind: cuda-build\n    sources: [" + cu + "]\n    reproducible: off\n" + extra
	}
	files := map[string]string{
		"a.cu":       "#include \"op.h\"\n__global__ void a(float *x) { x[threadIdx.x] OP 1.0f; }\n",
		"op.h":       "#pragma once\n#define OP +=\n",
		"b.cu":       "__global__ void b(float *x) { x[threadIdx.x] *= 2.0f; }\n",
		"c.cu":       "__global__ void c(float *x) { x[threadIdx.x] -= 3.0f; }\n",
		"a.yaml":     pipe("a", "a.cu", ""),
		"b.yaml":     pipe("b", "b.cu", "  - id: check\n    run: exit 1\n    needs: [kernels]\n"),
		"c.yaml":     strings.Replace(pipe("c", "c.cu", ""), "reproducible: off\n", "reproducible: off\n    flags: [-ccbin, ./cc.sh]\n", 1),
		"cc.sh":      "#!/bin/sh\necho escaped > " + outside + " 2>/dev/null\nexec g++ \"$@\"\n",
		".gitignore": "build/\n",
	}
	for name, body := range files {
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o755); err != nil {
			return nil, err
		}
	}
	if err := git(src, "init", "-q"); err != nil {
		return nil, err
	}
	if err := commitAll(src, "kernels"); err != nil {
		return nil, err
	}
	if out, err := l.callOK(ctx, dir, nil, "key", "generate", "--no-password", "--output-key-prefix", filepath.Join(dir, "rel")); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, out)
	}
	s := &signedLab{lab: l, dir: dir, src: src, key: filepath.Join(dir, "rel.key"), pub: filepath.Join(dir, "rel.pub"), outside: outside,
		policy: filepath.Join(dir, "steps.yaml")}
	if err := os.WriteFile(s.policy, []byte(stepsPolicy), 0o644); err != nil {
		return nil, err
	}
	var rs []result
	for _, c := range []func(context.Context) (result, error){s.headerChange, s.unjudgedVSA, s.twoProvenances, s.ccbinEscape} {
		r, err := c(ctx)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// signedLab is the signed category's source repository and key.
type signedLab struct {
	*lab
	dir, src, key, pub, outside, policy string
	runs                                int
}

// stepsPolicy passes a validation predicate whose steps all passed.
const stepsPolicy = "apiVersion: gpuattest.dev/v1\nkind: Policy\nrules:\n  - name: steps passed\n    expr: predicate.steps.all(s, s.verdict in [\"passed\", \"cached\"])\n    message: no step failed\n"

func git(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.name=adv", "-c", "user.email=adv@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func commitAll(dir, msg string) error {
	if err := git(dir, "add", "-A"); err != nil {
		return err
	}
	return git(dir, "commit", "-q", "-m", msg)
}

// signedRun runs pipeline name signed and returns its run directory, the
// call's result (right when the exit code is one of codes) and output.
func (s *signedLab) signedRun(ctx context.Context, name string, codes ...int) (string, result, string, error) {
	s.runs++
	run := filepath.Join(s.dir, fmt.Sprintf("run-%s-%d", name, s.runs))
	u, out, err := s.call(ctx, s.src, []string{"GPUATTEST_PASSWORD="}, "run", name+".yaml", "--out", run, "--key", s.key, "-q")
	r := result{usage: u}
	if err == nil {
		r.right, r.why = exitIn(u, out, codes...)
	}
	return run, r, out, err
}

// fatbinDigest is the sha256 run.json records for the kernels step's
// first artifact.
func fatbinDigest(run string) (string, error) {
	var rec struct {
		Steps []struct {
			ID        string
			Cache     string
			Artifacts []struct{ SHA256 string }
		}
	}
	b, err := os.ReadFile(filepath.Join(run, "run.json"))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return "", err
	}
	for _, st := range rec.Steps {
		if st.ID == "kernels" && len(st.Artifacts) > 0 {
			return st.Cache + ":" + st.Artifacts[0].SHA256, nil
		}
	}
	return "", fmt.Errorf("%s: no kernels artifact", run)
}

// headerChange: after a signed run, a commit that changes only the
// header a.cu includes must run nvcc again; the signed fatbin differs.
func (s *signedLab) headerChange(ctx context.Context) (result, error) {
	first, r, out, err := s.signedRun(ctx, "a", 0)
	if err != nil || !r.right {
		r.name = "cache: first signed run of a.cu"
		return r, err
	}
	if err := os.WriteFile(filepath.Join(s.src, "op.h"), []byte("#pragma once\n#define OP -=\n"), 0o644); err != nil {
		return r, err
	}
	if err := commitAll(s.src, "header only"); err != nil {
		return r, err
	}
	second, r, out2, err := s.signedRun(ctx, "a", 0)
	r.name = "cache: a header-only change (+= to -=) is no cache hit; the signed fatbin is rebuilt"
	if err != nil || !r.right {
		return r, err
	}
	d1, err1 := fatbinDigest(first)
	d2, err2 := fatbinDigest(second)
	switch {
	case err1 != nil || err2 != nil:
		r.right, r.why = false, fmt.Sprintf("%v %v%s%s", err1, err2, tail(out), tail(out2))
	case strings.HasPrefix(d2, "hit:") || strings.TrimPrefix(d1, "miss:") == strings.TrimPrefix(d2, "miss:"):
		r.right, r.why = false, "the second run signed "+d2+", the first "+d1
	}
	// Back to the first header, for the cases after this one.
	if err := git(s.src, "revert", "--no-edit", "HEAD"); err != nil {
		return r, err
	}
	return r, nil
}

// unjudgedVSA: a.yaml's passing bundles and b.yaml's failing ones in one
// file; verify --vsa-out of a.fatbin must not name b's fatbin.
func (s *signedLab) unjudgedVSA(ctx context.Context) (result, error) {
	ra, r, _, err := s.signedRun(ctx, "a", 0)
	if err != nil || !r.right {
		r.name = "vsa: signed run of a.yaml"
		return r, err
	}
	rb, r, _, err := s.signedRun(ctx, "b", 1)
	if err != nil || !r.right {
		r.name = "vsa: signed failing run of b.yaml"
		return r, err
	}
	both, err := s.concat(ra, rb)
	if err != nil {
		return r, err
	}
	vsa := filepath.Join(s.dir, "verify-vsa.json")
	afat := filepath.Join(ra, "steps", "kernels", "outputs", "build", "a.fatbin")
	u, out, err := s.call(ctx, s.dir, []string{"GPUATTEST_PASSWORD="}, "verify", "--bundle", both, "--key", s.pub, "--policy", s.policy,
		"--sign-key", s.key, "--vsa-out", vsa, afat)
	r = result{name: "vsa: verify --vsa-out names only the bundles the policy judged", usage: u}
	if err != nil {
		return r, err
	}
	if r.right, r.why = exitIn(u, out, 0); r.right {
		r.right, r.why = vsaNames(vsa, "build/a.fatbin", "build/b.fatbin")
	}
	return r, nil
}

// concat writes the attestations of the runs into one file.
func (s *signedLab) concat(runs ...string) (string, error) {
	var all []byte
	for _, r := range runs {
		b, err := os.ReadFile(filepath.Join(r, "attestations.intoto.jsonl"))
		if err != nil {
			return "", err
		}
		all = append(all, b...)
	}
	file := filepath.Join(s.dir, fmt.Sprintf("both-%d.jsonl", s.runs))
	return file, os.WriteFile(file, all, 0o644)
}

// vsaNames checks that the VSA bundle file names want and not never.
func vsaNames(file, want, never string) (bool, string) {
	b, err := os.ReadFile(file)
	if err != nil {
		return false, "no VSA written: " + err.Error()
	}
	var bundle struct {
		DSSEEnvelope struct{ Payload []byte } `json:"dsseEnvelope"`
	}
	var st struct{ Subject []struct{ Name string } }
	if err := json.Unmarshal(b, &bundle); err != nil {
		return false, err.Error()
	}
	if err := json.Unmarshal(bundle.DSSEEnvelope.Payload, &st); err != nil {
		return false, err.Error()
	}
	var names []string
	for _, sub := range st.Subject {
		names = append(names, sub.Name)
	}
	joined := "," + strings.Join(names, ",") + ","
	if !strings.Contains(joined, ","+want+",") || strings.Contains(joined, ","+never+",") {
		return false, "the VSA names " + strings.Join(names, ", ")
	}
	return true, ""
}

// twoProvenances: rebuild of a file with two provenances is refused;
// with a.fatbin as ARTIFACT, only a's provenance is rebuilt and named.
func (s *signedLab) twoProvenances(ctx context.Context) (result, error) {
	ra, r, _, err := s.signedRun(ctx, "a", 0)
	if err != nil || !r.right {
		r.name = "rebuild: signed run of a.yaml"
		return r, err
	}
	rc, r, _, err := s.signedRun(ctx, "c", 0)
	if err != nil || !r.right {
		r.name = "rebuild: signed run of c.yaml"
		return r, err
	}
	both, err := s.concat(ra, rc)
	if err != nil {
		return r, err
	}
	u, out, err := s.call(ctx, s.dir, []string{"GPUATTEST_PASSWORD="}, "rebuild", "--bundle", both, "--key", s.pub, "--source", s.src,
		"--out", filepath.Join(s.dir, "rb-refused"), "--sign-key", s.key)
	r = result{name: "rebuild: two provenances in one file are refused, naming both", usage: u}
	if err != nil {
		return r, err
	}
	if r.right, r.why = exitIn(u, out, 1); r.right && !strings.Contains(out, "2 verified SLSA provenance statements") {
		r.right, r.why = false, "the refusal does not say why"+tail(out)
	}
	if !r.right {
		return r, nil
	}
	vsa := filepath.Join(s.dir, "rebuild-vsa.json")
	afat := filepath.Join(ra, "steps", "kernels", "outputs", "build", "a.fatbin")
	u, out, err = s.call(ctx, s.dir, []string{"GPUATTEST_PASSWORD="}, "rebuild", "--bundle", both, "--key", s.pub, "--source", s.src,
		"--out", filepath.Join(s.dir, "rb-a"), "--sign-key", s.key, "--vsa-out", vsa, afat)
	r = result{name: "rebuild: the VSA names only the provenance rebuilt (its ARTIFACT's)", usage: u}
	if err != nil {
		return r, err
	}
	if r.right, r.why = exitIn(u, out, 0); r.right {
		r.right, r.why = vsaNames(vsa, "build/a.fatbin", "build/c.fatbin")
	}
	return r, nil
}

// ccbinEscape: rebuild of c.yaml, whose -ccbin is a script of the source
// that writes outside the rebuild directory; the write must not happen.
func (s *signedLab) ccbinEscape(ctx context.Context) (result, error) {
	rc, r, _, err := s.signedRun(ctx, "c", 0)
	if err != nil || !r.right {
		r.name = "rebuild: signed run of c.yaml"
		return r, err
	}
	os.Remove(s.outside)
	u, out, err := s.call(ctx, s.dir, nil, "rebuild", "--bundle", filepath.Join(rc, "attestations.intoto.jsonl"), "--key", s.pub, "--source", s.src,
		"--out", filepath.Join(s.dir, "rb-c"))
	r = result{name: "rebuild: a -ccbin script of the source cannot write outside the rebuild directory", usage: u}
	if err != nil {
		return r, err
	}
	r.right, r.why = exitIn(u, out, 0)
	if _, err := os.Stat(s.outside); err == nil {
		r.right, r.why = false, "the source's script wrote "+s.outside
	}
	return r, nil
}
