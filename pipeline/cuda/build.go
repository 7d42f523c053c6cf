package cuda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Build is the executor of cuda-build steps.
type Build struct {
	// Jobs caps how many nvcc processes run at once; zero means one per CPU.
	Jobs int
}

var _ step.Executor = (*Build)(nil)

// Job is one nvcc invocation of a cuda-build step.
type Job struct {
	// Source is the .cu file, relative to the work dir.
	Source string `json:"source"`
	// Args is nvcc's complete argv (Args[0] is "nvcc"); paths in it are
	// relative to the work dir, so the same argv rebuilds anywhere.
	Args []string `json:"argv"`
	// Outputs are the files the job writes, relative to the work dir.
	Outputs []string `json:"outputs"`
	// Target is the single target of a cubin or ptx job; empty otherwise.
	Target string `json:"target,omitempty"`
}

// Plan returns the nvcc jobs of the cuda-build step s of p: one per source
// for fatbin and object outputs (<outDir>/<base>.fatbin, .o), one per
// source and target for cubin (<base>.sm_XX.cubin) and ptx
// (<base>.compute_XX.ptx), since nvcc writes those for one architecture
// at a time. It does not check flags; see [CheckStep].
func Plan(p *pipeline.Pipeline, s *pipeline.Step) ([]Job, error) {
	targets, err := ParseTargets(p.Targets)
	if err != nil {
		return nil, err
	}
	ptx := s.PTX == nil || *s.PTX
	outDir := s.OutDir
	if outDir == "" {
		outDir = "build"
	}
	outDir = path.Clean(outDir)
	var jobs []Job
	for _, src := range s.Sources {
		base := baseName(src)
		one := func(mode, out, target string, gencode []string) Job {
			args := []string{"nvcc", mode}
			args = append(args, gencode...)
			args = append(args, s.Flags...)
			args = append(args, "-o", out, src)
			return Job{Source: src, Args: args, Outputs: []string{out}, Target: target}
		}
		switch s.Output {
		case "", OutputFatbin:
			jobs = append(jobs, one("-fatbin", path.Join(outDir, base+".fatbin"), "", GencodeArgs(targets, ptx)))
		case OutputObject:
			jobs = append(jobs, one("-c", path.Join(outDir, base+".o"), "", GencodeArgs(targets, ptx)))
		case OutputCubin:
			for _, t := range targets {
				jobs = append(jobs, one("-cubin", path.Join(outDir, base+"."+t.SM()+".cubin"), t.SM(), GencodeArgs([]Target{t}, false)))
			}
		case OutputPTX:
			for _, t := range targets {
				jobs = append(jobs, one("-ptx", path.Join(outDir, base+"."+t.Compute()+".ptx"), t.SM(),
					[]string{"-gencode", fmt.Sprintf("arch=%s,code=%s", t.Compute(), t.Compute())}))
			}
		default:
			return nil, fmt.Errorf("unknown output %q: expected fatbin, cubin, ptx or object", s.Output)
		}
	}
	return jobs, nil
}

// BuildDetails are the facts of a cuda-build step, stored in run.json.
type BuildDetails struct {
	// Targets are the pinned targets, lowest first.
	Targets []string `json:"targets"`
	// Output is the artifact type.
	Output string `json:"output"`
	// PTX tells whether PTX for the highest target was embedded.
	PTX bool `json:"ptx"`
	// Commands are the exact nvcc invocations, in plan order.
	Commands []CommandRecord `json:"commands"`
	// ClearedEnv holds NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS as they were
	// in the step's environment before gpuattest cleared them.
	ClearedEnv map[string]string `json:"cleared_env,omitempty"`
	// Artifacts are the inspected outputs (paths relative to the work dir).
	Artifacts []*Inspection `json:"artifacts"`
	// Problems are the step's spec problems when it was refused before
	// nvcc ran (see CheckStep).
	Problems Issues `json:"problems,omitempty"`
	// ArchProblems lists artifacts whose architectures differ from the
	// pinned set.
	ArchProblems []string `json:"arch_problems,omitempty"`
	// Reproducibility is the second build's comparison, when checked.
	Reproducibility *ReproReport `json:"reproducibility,omitempty"`
	// Timings are the wall times of the step's phases.
	Timings Timings `json:"timings"`
}

// Timings are the wall times of a cuda-build step's phases, in
// milliseconds.
type Timings struct {
	// BuildMS covers all nvcc jobs (run in parallel).
	BuildMS int64 `json:"build_ms"`
	// InspectMS covers cuobjdump on every artifact.
	InspectMS int64 `json:"inspect_ms"`
	// ReproMS covers the copy, second build and comparison.
	ReproMS int64 `json:"repro_ms,omitempty"`
}

// CommandRecord is one nvcc process as it ran.
type CommandRecord struct {
	// Source is the .cu file.
	Source string `json:"source"`
	// Argv is the exact argv.
	Argv []string `json:"argv"`
	// Line is Argv quoted for a POSIX shell.
	Line string `json:"line"`
	// ExitCode is nvcc's exit status.
	ExitCode int `json:"exit_code"`
	// DurationMS is its wall time in milliseconds.
	DurationMS int64 `json:"duration_ms"`
}

// clearedVars are nvcc environment variables that would add flags behind
// the pipeline's back.
var clearedVars = []string{"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"}

// Execute runs the cuda-build step s.Step: it checks the step, runs the
// planned nvcc jobs in parallel through s.Runner, inspects every artifact
// and fails unless its SASS (and PTX) architectures equal the pinned set,
// and with reproducible: check rebuilds in a copy under s.StepDir and
// fails when any output differs (report in steps/<id>/repro.json).
func (b *Build) Execute(ctx context.Context, s *step.Context) (*step.Outcome, error) {
	st := s.Step
	idx := StepIndex(s.Pipeline, st)
	if idx < 0 {
		return nil, fmt.Errorf("cuda-build: step %q is not in the pipeline", st.ID)
	}
	if is := CheckStep(s.Pipeline, idx); len(is) > 0 {
		return &step.Outcome{Status: step.Failed, Reason: is[0].Path + ": " + is[0].Message, Details: &BuildDetails{Targets: s.Pipeline.Targets, Output: st.Output, Problems: is, Artifacts: []*Inspection{}}}, nil
	}
	jobs, err := Plan(s.Pipeline, st)
	if err != nil {
		return nil, err
	}
	targets, _ := ParseTargets(s.Pipeline.Targets)
	det := &BuildDetails{Output: st.Output, PTX: st.PTX == nil || *st.PTX, Artifacts: []*Inspection{}}
	if det.Output == "" {
		det.Output = OutputFatbin
	}
	for _, t := range targets {
		det.Targets = append(det.Targets, t.SM())
	}
	env, cleared := clearEnv(s.Env)
	if !s.Image.IsZero() {
		// The image's own ENV counts too: record it (the explicit empty
		// values in env override it).
		fromImage, err := imageNVCCEnv(ctx, s.Runner, s.Image, s.WorkDir, s.Env)
		if err != nil {
			return nil, fmt.Errorf("reading the image's nvcc environment: %w", err)
		}
		for k, v := range fromImage {
			if _, set := cleared[k]; !set {
				if cleared == nil {
					cleared = map[string]string{}
				}
				cleared[k] = v
			}
		}
	}
	det.ClearedEnv = cleared
	for k, v := range cleared {
		s.Logger.Warn("cleared nvcc environment variable", "step", st.ID, "var", k, "value", v)
	}
	for _, src := range st.Sources {
		if _, err := os.Stat(filepath.Join(s.WorkDir, filepath.FromSlash(src))); err != nil {
			return &step.Outcome{Status: step.Failed, Reason: fmt.Sprintf("steps[%d].sources: %v", idx, err), Details: det}, nil
		}
	}

	t0 := time.Now()
	recs, failed, err := b.runJobs(ctx, s.Runner, s.WorkDir, env, s.Image, jobs, s.Stdout, s.Stderr)
	det.Commands = recs
	det.Timings.BuildMS = time.Since(t0).Milliseconds()
	if err != nil {
		return nil, err
	}
	if failed >= 0 {
		code := recs[failed].ExitCode
		return &step.Outcome{Status: step.Failed, ExitCode: &code, Reason: fmt.Sprintf("nvcc exited %d compiling %s (see stderr.log)", code, recs[failed].Source), Details: det}, nil
	}

	// Inspect every output, in parallel like the builds; results keep
	// plan order.
	type item struct {
		out    string
		target string
	}
	var items []item
	for _, j := range jobs {
		for _, o := range j.Outputs {
			items = append(items, item{o, j.Target})
		}
	}
	t0 = time.Now()
	ins := make([]*Inspection, len(items))
	errs := make([]error, len(items))
	b.forEach(len(items), func(i int) {
		ins[i], errs[i] = Inspect(ctx, s.Runner, filepath.Join(s.WorkDir, filepath.FromSlash(items[i].out)), WithEnv(env), WithImage(s.Image), WithTempDir(s.StepDir))
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	det.Timings.InspectMS = time.Since(t0).Milliseconds()
	var files []step.File
	for i, in := range ins {
		in.Path = items[i].out
		det.Artifacts = append(det.Artifacts, in)
		if p := checkArchs(in, det.Output, targets, det.PTX, items[i].target); p != "" {
			det.ArchProblems = append(det.ArchProblems, p)
		}
		files = append(files, step.File{Path: in.Path, SHA256: in.SHA256, Size: in.Size, Kind: det.Output})
	}
	out := &step.Outcome{Status: step.Passed, Details: det, Artifacts: files}
	if len(det.ArchProblems) > 0 {
		out.Status = step.Failed
		out.Reason = det.ArchProblems[0]
		return out, nil
	}
	if st.Reproducible == "check" {
		t0 = time.Now()
		rep, err := b.checkReproducible(ctx, s, env, jobs)
		det.Timings.ReproMS = time.Since(t0).Milliseconds()
		if err != nil {
			return nil, fmt.Errorf("reproducibility check: %w", err)
		}
		det.Reproducibility = rep
		if !rep.Reproducible {
			var names []string
			for _, d := range rep.Differing {
				names = append(names, d.Path)
			}
			out.Status = step.Failed
			out.Reason = fmt.Sprintf("not reproducible: %s differ between two builds (see repro.json)", strings.Join(names, ", "))
		}
	}
	return out, nil
}

// checkArchs compares an artifact's architectures with what the step pins.
func checkArchs(in *Inspection, output string, targets []Target, ptx bool, target string) string {
	var wantSASS, wantPTX []string
	switch output {
	case OutputCubin:
		wantSASS = []string{target}
	case OutputPTX:
		t, _ := ParseTarget(target)
		wantPTX = []string{t.Compute()}
	default:
		for _, t := range targets {
			wantSASS = append(wantSASS, t.SM())
		}
		if ptx && len(targets) > 0 {
			wantPTX = []string{targets[len(targets)-1].Compute()}
		}
	}
	var msgs []string
	if d := setDiff("SASS", in.SASS, wantSASS); d != "" {
		msgs = append(msgs, d)
	}
	if d := setDiff("PTX", in.PTX, wantPTX); d != "" {
		msgs = append(msgs, d)
	}
	if len(msgs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s (pinned targets: %s)", in.Path, strings.Join(msgs, "; "), targetList(targets))
}

func targetList(ts []Target) string {
	var ss []string
	for _, t := range ts {
		ss = append(ss, t.SM())
	}
	return "[" + strings.Join(ss, " ") + "]"
}

// setDiff describes how got differs from want, or returns "".
func setDiff(what string, got, want []string) string {
	var extra, missing []string
	for _, g := range got {
		if !contains(want, g) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !contains(got, w) {
			missing = append(missing, w)
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return ""
	}
	sort.Strings(extra)
	sort.Strings(missing)
	msg := fmt.Sprintf("%s architectures [%s] do not match the expected [%s]", what, strings.Join(got, " "), strings.Join(want, " "))
	if len(extra) > 0 {
		msg += ": extra " + strings.Join(extra, ", ")
	}
	if len(missing) > 0 {
		if len(extra) > 0 {
			msg += ","
		} else {
			msg += ":"
		}
		msg += " missing " + strings.Join(missing, ", ")
	}
	return msg
}

// clearEnv removes the variables in clearedVars from env, then sets each
// to the empty string (so an image's own ENV cannot inject flags either),
// and returns what env held.
func clearEnv(env []string) ([]string, map[string]string) {
	var out []string
	var cleared map[string]string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if contains(clearedVars, k) {
			if cleared == nil {
				cleared = map[string]string{}
			}
			cleared[k] = v
			continue
		}
		out = append(out, kv)
	}
	for _, k := range clearedVars {
		out = append(out, k+"=")
	}
	return out, cleared
}

// imageNVCCEnv reads the clearedVars an image's own environment sets, by
// running sh in it with env minus those variables.
func imageNVCCEnv(ctx context.Context, r runner.Runner, img image.Pinned, dir string, env []string) (map[string]string, error) {
	var base []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !contains(clearedVars, k) {
			base = append(base, kv)
		}
	}
	script := ""
	for _, k := range clearedVars {
		script += fmt.Sprintf(`if [ -n "${%[1]s+set}" ]; then printf '%%s=%%s\0' %[1]s "$%[1]s"; fi; `, k)
	}
	var out, errb bytes.Buffer
	res, err := r.Run(ctx, &runner.Command{Args: []string{"sh", "-c", script}, Dir: dir, Env: base, Stdout: &out, Stderr: &errb, Image: img})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("sh exited %d: %s", res.ExitCode, strings.TrimSpace(errb.String()))
	}
	m := map[string]string{}
	for _, kv := range strings.Split(out.String(), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m, nil
}

// RunJobs runs jobs in dir through r, at most jobs-at-once in parallel
// (zero: one per CPU), creating their output directories first. It
// writes each job's command line and output to stdout/stderr once the job
// ends, so logs of parallel jobs do not interleave. It returns one record
// per job and the index of the first failed job (-1 when all succeeded);
// the error is for a job that could not run at all.
func RunJobs(ctx context.Context, r runner.Runner, dir string, env []string, img image.Pinned, jobs []Job, parallel int, stdout, stderr io.Writer) ([]CommandRecord, int, error) {
	b := &Build{Jobs: parallel}
	return b.runJobs(ctx, r, dir, env, img, jobs, stdout, stderr)
}

func (b *Build) runJobs(ctx context.Context, r runner.Runner, dir string, env []string, img image.Pinned, jobs []Job, stdout, stderr io.Writer) ([]CommandRecord, int, error) {
	// Output directories are made through a root of dir: a directory
	// symlink in the work dir cannot make gpuattest create one elsewhere.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, -1, fmt.Errorf("opening the work dir: %w", err)
	}
	defer root.Close()
	for _, j := range jobs {
		for _, o := range j.Outputs {
			if err := root.MkdirAll(filepath.Dir(filepath.FromSlash(o)), 0o755); err != nil {
				return nil, -1, fmt.Errorf("creating output directory: %w", err)
			}
		}
	}
	recs := make([]CommandRecord, len(jobs))
	errs := make([]error, len(jobs))
	var mu sync.Mutex
	b.forEach(len(jobs), func(i int) {
		if ctx.Err() != nil {
			errs[i] = fmt.Errorf("building %s: %w", jobs[i].Source, context.Cause(ctx))
			return
		}
		j := jobs[i]
		var so, se bytes.Buffer
		start := time.Now()
		res, err := r.Run(ctx, &runner.Command{Args: j.Args, Dir: dir, Env: env, Stdout: &so, Stderr: &se, Image: img})
		recs[i] = CommandRecord{Source: j.Source, Argv: j.Args, Line: shellQuote(j.Args), DurationMS: time.Since(start).Milliseconds()}
		if err != nil {
			errs[i] = fmt.Errorf("running nvcc for %s: %w", j.Source, err)
			recs[i].ExitCode = -1
		} else {
			recs[i].ExitCode = res.ExitCode
		}
		mu.Lock()
		defer mu.Unlock()
		if stdout != nil {
			fmt.Fprintf(stdout, "$ %s\n", recs[i].Line)
			stdout.Write(so.Bytes())
		}
		if stderr != nil && se.Len() > 0 {
			fmt.Fprintf(stderr, "# %s\n", j.Source)
			stderr.Write(se.Bytes())
		}
	})
	if err := errors.Join(errs...); err != nil {
		return recs, -1, err
	}
	if ctx.Err() != nil {
		return recs, -1, fmt.Errorf("building: %w", context.Cause(ctx))
	}
	for i, rec := range recs {
		if rec.ExitCode != 0 {
			return recs, i, nil
		}
	}
	return recs, -1, nil
}

// forEach calls f(0..n-1) on at most b.Jobs goroutines (one per CPU when
// zero) and returns when all calls have.
func (b *Build) forEach(n int, f func(i int)) {
	w := b.Jobs
	if w <= 0 {
		w = runtime.NumCPU()
	}
	w = min(w, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// checkReproducible copies the work dir's sources into a fresh directory
// under the step dir, runs the same jobs there and compares every output.
func (b *Build) checkReproducible(ctx context.Context, s *step.Context, env []string, jobs []Job) (*ReproReport, error) {
	base := s.StepDir
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(base, "repro-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	second := filepath.Join(tmp, "src")
	var outputs []string
	for _, j := range jobs {
		outputs = append(outputs, j.Outputs...)
	}
	skip := []string{tmp, s.StepDir}
	if stepsDir := filepath.Dir(s.StepDir); s.StepDir != "" && filepath.Base(stepsDir) == "steps" {
		skip = append(skip, filepath.Dir(stepsDir)) // the whole run directory
	}
	for _, o := range outputs {
		skip = append(skip, filepath.Join(s.WorkDir, filepath.FromSlash(o)))
	}
	if err := copyTree(s.WorkDir, second, skip); err != nil {
		return nil, fmt.Errorf("copying sources for the second build: %w", err)
	}
	var log bytes.Buffer
	recs, failed, err := b.runJobs(ctx, s.Runner, second, env, s.Image, jobs, &log, &log)
	if err != nil {
		return nil, err
	}
	if failed >= 0 {
		return nil, fmt.Errorf("second build: nvcc exited %d compiling %s:\n%s", recs[failed].ExitCode, recs[failed].Source, log.String())
	}
	rep, err := CompareBuilds(s.WorkDir, second, outputs)
	if err != nil {
		return nil, err
	}
	if s.StepDir != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(filepath.Join(s.StepDir, "repro.json"), append(data, '\n')); err != nil {
			return nil, err
		}
	}
	if s.Stdout != nil {
		fmt.Fprintf(s.Stdout, "# reproducibility check (second build in %s)\n%s\n", second, rep.Summary())
	}
	for _, d := range rep.Differing {
		s.Logger.Warn("build output differs between two builds", "step", s.Step.ID, "diff", d.Summary())
	}
	return rep, nil
}

// CompareBuilds compares the outputs (relative paths) of a build in first
// with those of a build of the same inputs in second.
func CompareBuilds(first, second string, outputs []string) (*ReproReport, error) {
	rep := &ReproReport{Reproducible: true, FirstDir: first, SecondDir: second, Identical: []string{}, Differing: []*FileDiff{}}
	for _, o := range outputs {
		d, err := CompareFiles(filepath.Join(first, filepath.FromSlash(o)), filepath.Join(second, filepath.FromSlash(o)))
		if err != nil {
			return nil, err
		}
		d.Path = o
		if d.Identical {
			rep.Identical = append(rep.Identical, o)
			continue
		}
		rep.Reproducible = false
		rep.Differing = append(rep.Differing, d)
	}
	return rep, nil
}

// maxCopyBytes bounds the work dir copy of a reproducibility check.
const maxCopyBytes = 1 << 30

// copyTree copies the regular files and directories of src into dst,
// skipping hidden directories (.git, .cache, ...), the paths in skip and
// anything under them; symlinks are recreated as symlinks.
func copyTree(src, dst string, skip []string) error {
	// A work dir reached through a symlink (pipelines/kernels -> ../kernels)
	// is walked at its real path; skip paths are resolved the same way.
	src = resolve(src)
	for i := range skip {
		skip[i] = resolve(skip[i])
	}
	var total int64
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if s != "" && p == s {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() && p != src && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
			if total > maxCopyBytes {
				return fmt.Errorf("work dir %s holds more than %d bytes\nhint: give the cuda-build step its own workdir holding only its sources", src, maxCopyBytes)
			}
			return copyFile(p, target, info.Mode().Perm())
		}
		return nil
	})
}

// resolve returns p with symlinks evaluated, or p when that fails.
func resolve(p string) string {
	if p == "" {
		return p
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFileAtomic writes data to name through a temporary file in the same
// directory, synced and renamed into place.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, name)
}

// shellQuote joins args quoting each for a POSIX shell where needed.
func shellQuote(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@%", r))
		}) < 0 {
			b.WriteString(a)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}
