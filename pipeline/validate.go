package pipeline

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

// MaxRounds is the most invocations of each side a benchmark with a
// reference may ask for (rounds): the paired test's bound on pairs,
// stats.MaxPairs (a test in pipeline/suite holds them equal).
const MaxRounds = 2000

// DefaultGateAlpha is a gate's significance level when the pipeline
// gives none: stats.DefaultAlpha.
const DefaultGateAlpha = 0.01

// MinRounds is the fewest rounds with which the paired signed-rank test
// the gate runs can reach significance at alpha: with n pairs its
// smallest two-sided p-value is 2^(1-n) (stats.MinPairs).
func MinRounds(alpha float64) int {
	n := 1
	for math.Ldexp(1, 1-n) >= alpha && n < MaxRounds {
		n++
	}
	return n
}

// MaxStepID is the longest step id: an id names the step's directory
// (steps/<id>) and is exported to the step as GPUATTEST_STEP_ID.
const MaxStepID = 64

var (
	nameRE   = lazyregexp.New(`^[a-z0-9][a-z0-9._-]*$`)
	stepIDRE = lazyregexp.New(`^[a-zA-Z0-9][a-zA-Z0-9_-]*$`)
	driverRE = lazyregexp.New(`^[0-9]+(\.[0-9]+){0,2}$`)
	envKeyRE = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

var runners = []string{"host", "docker", "bwrap"}

// validator collects every problem of a decoded pipeline.
type validator struct {
	src *source
	p   *Pipeline
	// layout is where the file sits; nil when unknown (paths are then
	// checked by their names alone).
	layout *layout
	probs  Problems
}

func (v *validator) add(path string, atKey bool, hint, format string, args ...any) {
	if v.src.bad[path] {
		return // already reported as malformed
	}
	v.probs = append(v.probs, v.src.problem(path, atKey, hint, format, args...))
}

// validate checks a decoded pipeline's meaning; it never stops at the
// first problem.
func validate(p *Pipeline, src *source, l *layout) Problems {
	v := &validator{src: src, p: p, layout: l}
	v.header()
	v.targets()
	v.images()
	v.env("env", p.Env)
	v.passEnv("passEnv", p.PassEnv)
	v.workdir()
	if p.Runner != "" && !slices.Contains(runners, p.Runner) {
		v.add("runner", false, suggest(p.Runner, runners), "unknown runner %q: expected host, docker or bwrap", p.Runner)
	}
	if p.Preflight != nil && p.Preflight.MinDriver != "" && !driverRE.MatchString(p.Preflight.MinDriver) {
		v.add("preflight.minDriver", false, "write it as NVIDIA prints it, e.g. 535.104.05", "invalid driver version %q", p.Preflight.MinDriver)
	}
	v.steps()
	return v.probs
}

func (v *validator) header() {
	p := v.p
	switch {
	case p.APIVersion == "":
		v.add("", false, "add apiVersion: "+APIVersion, "missing required field apiVersion")
	case p.APIVersion != APIVersion:
		v.add("apiVersion", false, "this gpuattest reads "+APIVersion, "unsupported apiVersion %q", p.APIVersion)
	}
	switch {
	case p.Kind == "":
		v.add("", false, "add kind: "+KindPipeline, "missing required field kind")
	case p.Kind != KindPipeline:
		v.add("kind", false, "", "kind %q: expected %s", p.Kind, KindPipeline)
	}
	switch {
	case p.Name == "":
		v.add("", false, "add name: my-kernels", "missing required field name")
	case !nameRE.MatchString(p.Name):
		v.add("name", false, "use lowercase letters, digits, '.', '_' and '-'", "invalid name %q", p.Name)
	}
}

func (v *validator) targets() {
	seen := map[string]bool{}
	for i, t := range v.p.Targets {
		path := fmt.Sprintf("targets[%d]", i)
		if pt, err := ParseTarget(t); err != nil || !pt.Known() {
			hint := suggest(t, Architectures)
			if strings.HasPrefix(t, "compute_") {
				hint = "pin SASS targets (sm_XX); gpuattest adds the PTX itself"
			}
			v.add(path, false, hint, "unknown CUDA target %q: expected a real architecture such as sm_80 or sm_90", t)
			continue
		}
		if seen[t] {
			v.add(path, false, "", "target %q listed twice", t)
		}
		seen[t] = true
	}
	if len(v.p.Targets) == 0 && slices.ContainsFunc(v.p.Steps, func(s Step) bool { return s.Kind == KindCUDABuild }) {
		for _, is := range cudaTargetIssues(v.p.Targets) {
			v.add(is.Path, false, is.Hint, "%s", is.Message)
		}
	}
}

func (v *validator) images() {
	names := make([]string, 0, len(v.p.Images))
	for n := range v.p.Images {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ref := v.p.Images[n]
		if strings.TrimSpace(ref) == "" {
			v.add("images."+n, false, "e.g. nvidia/cuda:12.4.1-devel-ubuntu22.04", "image %q has an empty reference", n)
		}
	}
}

func (v *validator) env(path string, env map[string]string) {
	for k := range env {
		if !envKeyRE.MatchString(k) {
			v.add(path+"."+k, true, "", "invalid environment variable name %q", k)
		}
	}
}

// passEnv checks the names of host variables passed to container steps:
// valid names, never a signing secret.
func (v *validator) passEnv(path string, names []string) {
	for j, n := range names {
		p := fmt.Sprintf("%s[%d]", path, j)
		switch {
		case !envKeyRE.MatchString(n):
			v.add(p, false, "", "invalid environment variable name %q", n)
		case SigningSecret(n):
			v.add(p, false, "signing passwords and OIDC tokens stay with gpuattest; a step that needs a credential gets its own, through env or a file in its workdir", "%s is a signing secret: no step may see it", n)
		}
	}
}

func (v *validator) steps() {
	p := v.p
	if len(p.Steps) == 0 {
		v.add("steps", false, "add at least one step with an id and a run", "a pipeline needs at least one step")
		return
	}
	ids := map[string]int{}
	for i := range p.Steps {
		s := &p.Steps[i]
		path := fmt.Sprintf("steps[%d]", i)
		switch {
		case s.ID == "":
			v.add(path, false, "add id: build (a short name other steps use in needs)", "step %d: missing required field id", i+1)
		case !stepIDRE.MatchString(s.ID):
			v.add(path+".id", false, "use letters, digits, '_' and '-'", "invalid step id %q", s.ID)
		case len(s.ID) > MaxStepID:
			v.add(path+".id", false, "a step id names a directory and an environment value: keep it short", "step id of %d characters: at most %d", len(s.ID), MaxStepID)
		default:
			if first, dup := ids[s.ID]; dup {
				v.add(path+".id", false, fmt.Sprintf("rename one of them; the first is steps[%d]", first), "duplicate step id %q", s.ID)
			} else {
				ids[s.ID] = i
			}
		}
		v.step(i, s)
	}
	allIDs := make([]string, 0, len(ids))
	for id := range ids {
		allIDs = append(allIDs, id)
	}
	sort.Strings(allIDs)
	for i := range p.Steps {
		s := &p.Steps[i]
		for j, n := range s.Needs {
			path := fmt.Sprintf("steps[%d].needs[%d]", i, j)
			if n == s.ID {
				v.add(path, false, "remove it", "step %q needs itself", s.ID)
				continue
			}
			if _, ok := ids[n]; !ok {
				v.add(path, false, suggest(n, allIDs), "step %q needs unknown step %q", s.ID, n)
			}
		}
	}
	v.cycles(ids)
}

func (v *validator) step(i int, s *Step) {
	path := fmt.Sprintf("steps[%d]", i)
	kind := s.Kind
	if kind == "" {
		kind = KindExec
	}
	spec, ok := kinds[kind]
	if !ok {
		v.add(path+".kind", false, suggest(kind, Kinds()), "unknown step kind %q: expected one of %s", kind, strings.Join(Kinds(), ", "))
	} else {
		// Kind-specific fields on the wrong kind.
		for f, owners := range kindFields {
			if v.src.has(path+"."+f) && !slices.Contains(spec.fields, f) {
				v.add(path+"."+f, true, fmt.Sprintf("remove it, or use kind %s", strings.Join(owners, " or ")), "field %q is not valid for kind %s", f, kind)
			}
		}
		switch {
		case spec.run && s.Run.IsZero():
			if v.src.has(path + ".run") {
				v.add(path+".run", false, "give a shell string or an argv list", "step %q: empty run", s.ID)
			} else {
				v.add(path, false, "add run: with the command to execute", "step %q: missing required field run (kind %s runs a command)", s.ID, kind)
			}
		case !spec.run && !s.Run.IsZero():
			v.add(path+".run", true, "remove it; gpuattest builds the command line itself", "field \"run\" is not valid for kind %s", kind)
		case len(s.Run.Argv) > 0:
			for j, a := range s.Run.Argv {
				if j == 0 && strings.TrimSpace(a) == "" {
					v.add(fmt.Sprintf("%s.run[%d]", path, j), false, "", "step %q: empty program name in run", s.ID)
				}
			}
		}
		if spec.validate != nil {
			spec.validate(v, i, s)
		}
	}
	runnerName := s.Runner
	if runnerName != "" && !slices.Contains(runners, runnerName) {
		v.add(path+".runner", false, suggest(runnerName, runners), "unknown runner %q: expected host, docker or bwrap", runnerName)
	}
	if runnerName == "" {
		runnerName = v.p.Runner
	}
	if s.Image != "" {
		if _, ok := v.p.Images[s.Image]; !ok {
			names := make([]string, 0, len(v.p.Images))
			for n := range v.p.Images {
				names = append(names, n)
			}
			sort.Strings(names)
			hint := suggest(s.Image, names)
			if len(names) == 0 {
				hint = "declare it under images: at the top of the pipeline"
			}
			v.add(path+".image", false, hint, "step %q names undeclared image %q", s.ID, s.Image)
		}
		if runnerName == "" || runnerName == "host" {
			v.add(path+".image", true, "set runner: docker or runner: bwrap to run inside the image", "step %q names an image but runs on the host runner", s.ID)
		}
	} else if runnerName == "docker" || runnerName == "bwrap" {
		v.add(path, false, "add image: <name from images>", "step %q runs on the %s runner but names no image", s.ID, runnerName)
	}
	v.duration(path+".timeout", s.Timeout, false)
	v.duration(path+".interval", s.Interval, false)
	if !s.Interval.IsZero() && !s.GPU && kind != KindBurnin {
		v.add(path+".interval", true, "set gpu: true, or remove it", "step %q: interval is the GPU telemetry sampling interval; it applies to gpu: true steps and burn-ins", s.ID)
	}
	v.globs(path+".inputs", s.Inputs)
	v.globs(path+".outputs", s.Outputs)
	v.stepPaths(i, s)
	v.env(path+".env", s.Env)
	v.passEnv(path+".passEnv", s.PassEnv)
}

func (v *validator) globs(path string, globs []string) {
	for j, g := range globs {
		if strings.TrimSpace(g) == "" {
			v.add(fmt.Sprintf("%s[%d]", path, j), false, "", "empty glob")
		}
	}
}

// duration checks a decoded duration: required ones must be set, set
// ones positive (the decoder reported those that do not parse).
func (v *validator) duration(path string, d Duration, required bool) {
	name := path[strings.LastIndex(path, ".")+1:]
	if d.IsZero() {
		if required && !v.src.bad[path] {
			v.add(parentPath(path), false, "e.g. "+name+": 30s", "missing required field %s", name)
		}
		return
	}
	if d.D <= 0 {
		v.add(path, false, "", "duration %q must be positive", d.String())
	}
}

func validateCUDABuild(v *validator, i int, _ *Step) {
	for _, is := range cudaStepIssues(v.p, i, false) {
		v.add(is.Path, false, is.Hint, "%s", is.Message)
	}
}

func validateSuite(v *validator, i int, s *Step) {
	path := fmt.Sprintf("steps[%d]", i)
	if s.Results == "" {
		v.add(path, false, "add results: out/results.json (the file the command writes)", "step %q: missing required field results (a %s passes on its results, never on the exit code alone)", s.ID, s.Kind)
	}
	if s.Format != "" && !slices.Contains([]string{"auto", "gpuattest", "junit"}, s.Format) {
		v.add(path+".format", false, "", "format %q: expected auto, gpuattest or junit", s.Format)
	}
	if s.Warmup != nil && *s.Warmup < 0 {
		v.add(path+".warmup", false, "", "warmup must be 0 or more")
	}
	if v.src.has(path+".repeats") && !s.Repeats.Auto && s.Repeats.N < 1 {
		v.add(path+".repeats", false, "", "repeats must be 1 or more, or auto")
	}
	if s.Gate != nil {
		if s.Baseline == "" && s.Reference == nil {
			v.add(path+".gate", true, "add reference: {run: ..., results: ...} to compare in the same run, or baseline: path/to/baseline.json", "step %q has a gate but neither a reference nor a baseline", s.ID)
		}
		if s.Gate.Threshold.Fraction >= 1 {
			v.add(path+".gate.threshold", false, "e.g. 3%", "threshold %s: expected a slowdown below 100%%", s.Gate.Threshold)
		}
		if s.Gate.Alpha < 0 || s.Gate.Alpha >= 1 {
			v.add(path+".gate.alpha", false, "typical values are 0.01 or 0.05", "alpha %v must be between 0 and 1", s.Gate.Alpha)
		}
		if o := s.Gate.OnAmbiguous; o != "" && o != OnAmbiguousFail && o != OnAmbiguousWarn {
			v.add(path+".gate.onAmbiguous", false, "fail (the default: a gate that cannot tell must not pass) or warn", "onAmbiguous %q: expected fail or warn", o)
		}
	}
}

// validateBenchmark checks a benchmark's sampling and comparison fields.
func validateBenchmark(v *validator, i int, s *Step) {
	validateSuite(v, i, s)
	path := fmt.Sprintf("steps[%d]", i)
	if s.Repeats.Auto {
		if !s.Precision.IsZero() && (s.Precision.Fraction <= 0 || s.Precision.Fraction >= 1) {
			v.add(path+".precision", false, "e.g. 1%", "precision %q must be above 0%% and below 100%%", s.Precision)
		}
		v.duration(path+".maxTime", s.MaxTime, false)
	} else {
		for _, f := range []string{"precision", "maxTime"} {
			if v.src.has(path + "." + f) {
				v.add(path+"."+f, true, "set repeats: auto, or remove it", "%s applies to repeats: auto", f)
			}
		}
	}
	if s.Reference == nil {
		for _, f := range []string{"rounds", "maxRounds", "roundsTime"} {
			if v.src.has(path + "." + f) {
				v.add(path+"."+f, true, "add reference: {run: ..., results: ...}, or remove it", "%s applies to a benchmark with a reference", f)
			}
		}
		return
	}
	rp := path + ".reference"
	if s.Reference.Run.IsZero() {
		v.add(rp, false, "add run: with the reference command (e.g. the previous release's harness)", "step %q: reference needs run", s.ID)
	} else if len(s.Reference.Run.Argv) > 0 && strings.TrimSpace(s.Reference.Run.Argv[0]) == "" {
		v.add(rp+".run[0]", false, "", "step %q: empty program name in reference.run", s.ID)
	}
	if s.Reference.Results == "" {
		v.add(rp, false, "add results: the file the reference command writes", "step %q: reference needs results", s.ID)
	} else if s.Reference.Results == s.Results {
		v.add(rp+".results", false, "let the two commands write different files, e.g. build/ref.json and build/cand.json", "step %q: reference and candidate write the same results file %q", s.ID, s.Results)
	}
	v.referenceRelease(rp, s)
	validateRounds(v, path, s)
}

// validateRounds checks a benchmark's rounds and rounds: auto's budget.
func validateRounds(v *validator, path string, s *Step) {
	auto := s.Rounds.Auto || s.Rounds.IsZero() // auto is the default
	if !auto {
		for _, f := range []string{"maxRounds", "roundsTime"} {
			if v.src.has(path + "." + f) {
				v.add(path+"."+f, true, "remove rounds: N (auto is the default), or remove it", "%s applies to rounds: auto", f)
			}
		}
	}
	if auto {
		if v.src.has(path+".maxRounds") && (s.MaxRounds < 2 || s.MaxRounds > MaxRounds) {
			v.add(path+".maxRounds", false, fmt.Sprintf("%d is the default", DefaultMaxRounds), "maxRounds %d: expected 2 to %d pairs", s.MaxRounds, MaxRounds)
		}
		v.duration(path+".roundsTime", s.RoundsTime, false)
		return
	}
	if !v.src.has(path + ".rounds") {
		return
	}
	switch {
	case s.Rounds.N < 2 || s.Rounds.N > MaxRounds:
		v.add(path+".rounds", false, "auto (the default) samples until the gate is decided", "rounds %d: expected auto, or 2 to %d invocations of each side", s.Rounds.N, MaxRounds)
	default:
		alpha := DefaultGateAlpha
		if s.Gate != nil && s.Gate.Alpha > 0 && s.Gate.Alpha < 1 {
			alpha = s.Gate.Alpha
		}
		if need := MinRounds(alpha); s.Rounds.N < need {
			v.add(path+".rounds", false, fmt.Sprintf("use rounds: %d or more, rounds: auto (or a larger gate.alpha)", need),
				"rounds %d cannot reach significance at alpha %g: the paired signed-rank test's smallest p-value with %d pairs is %.2g", s.Rounds.N, alpha, s.Rounds.N, math.Ldexp(1, 1-s.Rounds.N))
		}
	}
}

// sha256Ref is a reference pinned by digest.
var sha256Ref = lazyregexp.New(`@sha256:[0-9a-f]{64}$`)

// referenceRelease checks a benchmark reference's release, key and
// policy; rp is the reference's field path.
func (v *validator) referenceRelease(rp string, s *Step) {
	r := s.Reference
	if r.Release == "" {
		for _, f := range []string{"key", "policy"} {
			if v.src.has(rp + "." + f) {
				v.add(rp+"."+f, true, "add release: REGISTRY/REPOSITORY@sha256:... (or oci-layout:DIR) to run the reference against a published release, or remove it", "step %q: reference.%s applies to a reference with a release", s.ID, f)
			}
		}
		return
	}
	if strings.TrimSpace(r.Key) == "" {
		v.add(rp, false, "add key: path/to/release.pub (the public key the release's attestations were signed with, relative to the pipeline file)",
			"step %q: reference.release needs key: nothing from a release runs unverified", s.ID)
	}
	if name, ok := r.BuiltinPolicy(); ok && !slices.Contains(BuiltinPolicies, name) {
		v.add(rp+".policy", false, "use builtin:"+strings.Join(BuiltinPolicies, ", builtin:")+" or a policy file", "step %q: reference.policy %q: no such built-in policy", s.ID, r.Policy)
	}
	dir, layout := LayoutDir(r.Release)
	switch {
	case layout && strings.TrimSpace(dir) == "":
		v.add(rp+".release", false, "e.g. oci-layout:releases/v1 (a directory written by gpuattest pull --to)", "release %q names no directory", r.Release)
	case !layout && (strings.ContainsAny(r.Release, " \t\n") || !strings.Contains(r.Release, "/")):
		v.add(rp+".release", false, "expected REGISTRY/REPOSITORY@sha256:<hex>, REGISTRY/REPOSITORY:TAG or oci-layout:DIR", "release %q is not a registry reference or an OCI layout", r.Release)
	case v.p.Release && !sha256Ref.MatchString(r.Release):
		v.add(rp+".release", false, "pin it: append @sha256:<digest> (gpuattest push prints it)", "release %q floats: a release: true pipeline compares against a release pinned by digest", r.Release)
	}
}

func validateBurnin(v *validator, i int, s *Step) {
	validateSuite(v, i, s)
	path := fmt.Sprintf("steps[%d]", i)
	if s.Repeats.Auto {
		v.add(path+".repeats", false, "give a count: each burn-in iteration runs the same work", "repeats: auto applies to benchmarks")
	}
	v.duration(path+".duration", s.Duration, true)
	if !s.MinDutyCycle.IsZero() && (s.MinDutyCycle.Fraction <= 0 || s.MinDutyCycle.Fraction > 1) {
		v.add(path+".minDutyCycle", false, "e.g. 95%", "minDutyCycle %q: expected a percentage above 0%% and at most 100%%", s.MinDutyCycle)
	}
}

// cycles reports each dependency cycle once, as a -> b -> a.
func (v *validator) cycles(ids map[string]int) {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(v.p.Steps))
	var stack []int
	reported := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for j, n := range v.p.Steps[i].Needs {
			k, ok := ids[n]
			if !ok || k == i {
				continue
			}
			switch color[k] {
			case white:
				visit(k)
			case grey:
				start := slices.Index(stack, k)
				cyc := make([]string, 0, len(stack)-start+1)
				members := append([]int(nil), stack[start:]...)
				for _, m := range members {
					cyc = append(cyc, v.p.Steps[m].ID)
				}
				key := canonicalCycle(cyc)
				if reported[key] {
					continue
				}
				reported[key] = true
				// The stack follows needs edges: a needs b needs ... needs a.
				cyc = append(cyc, v.p.Steps[k].ID)
				v.add(fmt.Sprintf("steps[%d].needs[%d]", i, j), false, "remove one of these needs", "dependency cycle: %s", strings.Join(cyc, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range v.p.Steps {
		if color[i] == white {
			visit(i)
		}
	}
}

func canonicalCycle(c []string) string {
	s := append([]string(nil), c...)
	sort.Strings(s)
	return strings.Join(s, "\x00")
}
