package pipeline

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

// Output types of a cuda-build step.
const (
	OutputFatbin = "fatbin"
	OutputCubin  = "cubin"
	OutputPTX    = "ptx"
	OutputObject = "object"
)

// cudaOutputs are the values output: takes.
var cudaOutputs = []string{OutputFatbin, OutputCubin, OutputPTX, OutputObject}

// archFlags select GPU architectures; the pipeline's targets are the only
// place architectures come from.
var archFlags = map[string]bool{
	"-arch": true, "--gpu-architecture": true,
	"-gencode": true, "--generate-code": true,
	"-code": true, "--gpu-code": true,
}

// outputFlags decide what nvcc writes and where; output: and outDir: do.
var outputFlags = map[string]bool{
	"-o": true, "--output-file": true, "-odir": true, "--output-directory": true,
	"-fatbin": true, "--fatbin": true, "-cubin": true, "--cubin": true,
	"-ptx": true, "--ptx": true, "-c": true, "--compile": true,
	"-lib": true, "--lib": true, "-dlink": true, "--device-link": true,
	"-link": true, "--link": true, "-run": true, "--run": true,
	"-E": true, "--preprocess": true, "-M": true, "--generate-dependencies": true,
	"-optix-ir": true, "--optix-ir": true, "-lto": true, "-dlto": true,
}

// debugFlags add debug information; refused in release mode.
var debugFlags = map[string]string{
	"-G": "device debug code disables optimisation", "--device-debug": "device debug code disables optimisation",
	"-g": "host debug information embeds build paths", "--debug": "host debug information embeds build paths",
	"-lineinfo": "line information embeds source paths", "--generate-line-info": "line information embeds source paths",
}

// flagsTakingValue are nvcc flags whose value may be the next element.
var flagsTakingValue = map[string]bool{
	"-arch": true, "--gpu-architecture": true, "-gencode": true, "--generate-code": true,
	"-code": true, "--gpu-code": true, "-o": true, "--output-file": true, "-odir": true,
	"--output-directory": true, "-ccbin": true, "--compiler-bindir": true,
	"-Xcompiler": true, "--compiler-options": true, "-Xptxas": true, "--ptxas-options": true,
	"-Xnvlink": true, "--nvlink-options": true, "-Xlinker": true, "--linker-options": true,
	"-I": true, "--include-path": true, "-D": true, "--define-macro": true,
	"-std": true, "--std": true, "-maxrregcount": true, "--maxrregcount": true,
	"-t": true, "--threads": true,
}

var archNameRE = lazyregexp.New(`\b(?:sm|compute|lto)_([0-9]{2,3}[a-z]?)\b`)

// CheckCUDABuild returns every problem of the cuda-build step p.Steps[i]:
// pinned targets that are missing or do not parse, no sources, sources
// outside the workdir or whose artifacts would collide, an unknown output
// or reproducible value, an outDir outside the workdir, flags that select
// architectures or outputs, and (in a release pipeline) debug flags.
//
// These are the cuda-build rules: Load reports them with positions, and the
// cuda-build executor refuses a step that breaks one (a pipeline built in
// code never went through Load).
func CheckCUDABuild(p *Pipeline, i int) Issues {
	return append(cudaTargetIssues(p.Targets), cudaStepIssues(p, i, true)...)
}

// cudaTargetIssues checks the pinned targets a cuda-build step builds for.
func cudaTargetIssues(targets []string) Issues {
	if _, err := ParseTargets(targets); err != nil {
		msg, hint, _ := strings.Cut(err.Error(), "\nhint: ")
		return Issues{{Path: "targets", Message: msg + " (a cuda-build step needs pinned targets)", Hint: hint}}
	}
	return nil
}

// cudaStep checks the fields of one cuda-build step.
type cudaStep struct {
	p *Pipeline
	i int
	s *Step
	// paths: check that sources and outDir stay inside the workdir. Load
	// checks every step's paths with the sandbox rule (paths.go) instead.
	paths bool
	is    Issues
}

func cudaStepIssues(p *Pipeline, i int, paths bool) Issues {
	c := &cudaStep{p: p, i: i, s: &p.Steps[i], paths: paths}
	c.sources()
	c.fields()
	c.flags()
	return c.is
}

func (c *cudaStep) at(field string, a ...any) string {
	return fmt.Sprintf("steps[%d].", c.i) + fmt.Sprintf(field, a...)
}

func (c *cudaStep) add(path, hint, format string, a ...any) {
	c.is = append(c.is, Issue{Path: path, Message: fmt.Sprintf(format, a...), Hint: hint})
}

// sources: at least one, each inside the workdir, no two writing the same
// artifact name.
func (c *cudaStep) sources() {
	s := c.s
	if len(s.Sources) == 0 {
		c.add(c.at("sources"), "list .cu files relative to the step's workdir, e.g. sources: [kernels/vector_add.cu]",
			"step %q: missing required field sources (a cuda-build step needs at least one source)", s.ID)
	}
	seen := map[string]int{}
	for j, src := range s.Sources {
		switch {
		case strings.TrimSpace(src) == "":
			c.add(c.at("sources[%d]", j), "", "empty source path")
			continue
		case c.paths && !insideWorkdir(src):
			c.add(c.at("sources[%d]", j), "sources are relative to the workdir so a rebuild elsewhere finds them", "%q is outside the step's workdir", src)
		}
		b := SourceBase(src)
		if k, dup := seen[b]; dup {
			c.add(c.at("sources[%d]", j), "rename one of them or build them in separate steps", "%q and sources[%d] (%q) would both write %s.*", src, k, s.Sources[k], b)
		} else {
			seen[b] = j
		}
	}
}

// fields: output, reproducible and outDir.
func (c *cudaStep) fields() {
	s := c.s
	if s.Output != "" && !slices.Contains(cudaOutputs, s.Output) {
		c.add(c.at("output"), suggest(s.Output, cudaOutputs), "unknown output %q: expected fatbin, cubin, ptx or object", s.Output)
	}
	switch s.Reproducible {
	case "", "check", "off":
	default:
		c.add(c.at("reproducible"), "", "unknown value %q: expected check or off", s.Reproducible)
	}
	if c.paths && s.OutDir != "" && !insideWorkdir(s.OutDir) {
		c.add(c.at("outDir"), "", "%q is outside the step's workdir", s.OutDir)
	}
}

// flags: nothing that selects architectures or outputs, and no debug
// information in a release pipeline. A flag whose value is the next
// element is judged (and reported) with it.
func (c *cudaStep) flags() {
	flags := c.s.Flags
	for j := 0; j < len(flags); j++ {
		f := flags[j]
		name, val, hasVal := strings.Cut(f, "=")
		if !hasVal {
			if n, v, ok := strings.Cut(f, " "); ok && flagsTakingValue[n] {
				name, val, hasVal = n, strings.TrimSpace(v), true
			}
		}
		fp := c.at("flags[%d]", j)
		if !hasVal && flagsTakingValue[name] && j+1 < len(flags) {
			val = flags[j+1]
			f = f + " " + val
			j++
		}
		switch {
		case archFlags[name]:
			c.is = append(c.is, c.archIssue(fp, f, val))
		case outputFlags[name]:
			c.add(fp, "remove the flag; set output: fatbin|cubin|ptx|object and outDir: instead", "%q decides nvcc's output; gpuattest sets it from output: and outDir:", f)
		case c.p.Release && debugFlags[name] != "":
			c.add(fp, "remove it from the release pipeline; keep debug builds in a non-release pipeline", "flag %q is not allowed in a release build: %s, which is refused in a release pipeline", f, debugFlags[name])
		}
	}
}

// archIssue explains why flag (whose value is val) may not select
// architectures.
func (c *cudaStep) archIssue(fp, flag, val string) Issue {
	pinnedList := strings.Join(c.p.Targets, ", ")
	low := strings.ToLower(val)
	if strings.Contains(low, "native") || strings.HasPrefix(low, "all") {
		return Issue{Path: fp, Message: fmt.Sprintf("flag %q builds for whatever GPUs the build machine or toolkit has, not for the pinned targets", flag),
			Hint: fmt.Sprintf("remove it: gpuattest passes one -gencode per pinned target (targets: [%s])", pinnedList)}
	}
	pinned := map[string]bool{}
	for _, s := range c.p.Targets {
		if t, err := ParseTarget(s); err == nil {
			pinned[t.SM()] = true
		}
	}
	var extra []string
	for _, m := range archNameRE.FindAllStringSubmatch(val, -1) {
		sm := "sm_" + m[1]
		if !pinned[sm] && !slices.Contains(extra, sm) {
			extra = append(extra, sm)
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 {
		return Issue{Path: fp, Message: fmt.Sprintf("%q adds architecture %s, which is not a pinned target (targets: [%s])", flag, strings.Join(extra, ", "), pinnedList),
			Hint: fmt.Sprintf("remove the flag, or add %s to the pipeline's targets so it is built and attested like the others", strings.Join(extra, ", "))}
	}
	return Issue{Path: fp, Message: fmt.Sprintf("%q selects architectures; gpuattest derives them from targets: [%s]", flag, pinnedList),
		Hint: "remove the flag: every pinned target already gets its own -gencode"}
}

// SourceBase is a cuda-build source's file name without directory and
// extension: the stem of the artifacts built from it (build/<stem>.fatbin).
func SourceBase(src string) string {
	b := path.Base(strings.ReplaceAll(src, "\\", "/"))
	if ext := path.Ext(b); ext != "" {
		b = strings.TrimSuffix(b, ext)
	}
	return b
}
