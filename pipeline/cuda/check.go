package cuda

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
)

// Issue is one thing wrong with a cuda-build step, by field path.
type Issue struct {
	// Path is the field path, e.g. steps[0].flags[2].
	Path string `json:"path"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Hint suggests a fix; may be empty.
	Hint string `json:"hint,omitempty"`
}

// String renders the issue as "path: message" plus a hint line.
func (i Issue) String() string {
	s := i.Path + ": " + i.Message
	if i.Hint != "" {
		s += "\nhint: " + i.Hint
	}
	return s
}

// Issues is every issue found in a step; it is an error.
type Issues []Issue

// Error renders every issue, one block each.
func (is Issues) Error() string {
	parts := make([]string, len(is))
	for i, x := range is {
		parts[i] = x.String()
	}
	return strings.Join(parts, "\n")
}

// Output types of a cuda-build step.
const (
	OutputFatbin = "fatbin"
	OutputCubin  = "cubin"
	OutputPTX    = "ptx"
	OutputObject = "object"
)

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

var archNameRE = regexp.MustCompile(`\b(?:sm|compute|lto)_([0-9]{2,3}[a-z]?)\b`)

// StepIndex returns the index of s in p.Steps (by identity, then by id),
// or -1.
func StepIndex(p *pipeline.Pipeline, s *pipeline.Step) int {
	if p == nil || s == nil {
		return -1
	}
	for i := range p.Steps {
		if &p.Steps[i] == s {
			return i
		}
	}
	for i := range p.Steps {
		if p.Steps[i].ID == s.ID {
			return i
		}
	}
	return -1
}

// CheckStep returns every problem of the cuda-build step p.Steps[i]: targets
// that do not parse, no sources, sources whose artifacts would collide, an
// unknown output or reproducible value, flags that select architectures or
// outputs, and (in release mode) debug flags. The pipeline validator and
// [Build] both call it.
func CheckStep(p *pipeline.Pipeline, i int) Issues {
	var is Issues
	s := &p.Steps[i]
	at := func(f string, a ...any) string { return fmt.Sprintf("steps[%d].", i) + fmt.Sprintf(f, a...) }
	targets, err := ParseTargets(p.Targets)
	if err != nil {
		msg, hint, _ := strings.Cut(err.Error(), "\nhint: ")
		is = append(is, Issue{Path: "targets", Message: msg + " (a cuda-build step needs pinned targets)", Hint: hint})
	}
	pinned := map[string]bool{}
	for _, t := range targets {
		pinned[t.SM()] = true
		pinned[t.Compute()] = true
	}
	if len(s.Sources) == 0 {
		is = append(is, Issue{Path: at("sources"), Message: "a cuda-build step needs at least one source", Hint: "list .cu files relative to the step's workdir"})
	}
	seen := map[string]int{}
	for j, src := range s.Sources {
		switch {
		case src == "":
			is = append(is, Issue{Path: at("sources[%d]", j), Message: "empty source path"})
			continue
		case path.IsAbs(src) || strings.HasPrefix(path.Clean(src), "../") || path.Clean(src) == "..":
			is = append(is, Issue{Path: at("sources[%d]", j), Message: fmt.Sprintf("%q is outside the step's workdir", src), Hint: "sources are relative to the workdir so a rebuild elsewhere finds them"})
		}
		b := baseName(src)
		if k, dup := seen[b]; dup {
			is = append(is, Issue{Path: at("sources[%d]", j), Message: fmt.Sprintf("%q and sources[%d] (%q) would both write %s.*", src, k, s.Sources[k], b), Hint: "rename one of them or build them in separate steps"})
		} else {
			seen[b] = j
		}
	}
	switch s.Output {
	case "", OutputFatbin, OutputCubin, OutputPTX, OutputObject:
	default:
		is = append(is, Issue{Path: at("output"), Message: fmt.Sprintf("unknown output %q: expected fatbin, cubin, ptx or object", s.Output)})
	}
	switch s.Reproducible {
	case "", "check", "off":
	default:
		is = append(is, Issue{Path: at("reproducible"), Message: fmt.Sprintf("unknown value %q: expected check or off", s.Reproducible)})
	}
	if s.OutDir != "" && (path.IsAbs(s.OutDir) || strings.HasPrefix(path.Clean(s.OutDir), "..")) {
		is = append(is, Issue{Path: at("outDir"), Message: fmt.Sprintf("%q is outside the step's workdir", s.OutDir)})
	}
	pinnedList := strings.Join(p.Targets, ", ")
	for j := 0; j < len(s.Flags); j++ {
		f := s.Flags[j]
		name, val, hasVal := strings.Cut(f, "=")
		if !hasVal {
			if n, v, ok := strings.Cut(f, " "); ok && flagsTakingValue[n] {
				name, val, hasVal = n, strings.TrimSpace(v), true
			}
		}
		fp := at("flags[%d]", j)
		if !hasVal && flagsTakingValue[name] && j+1 < len(s.Flags) {
			val = s.Flags[j+1]
			f = f + " " + val
			j++
		}
		switch {
		case archFlags[name]:
			is = append(is, archIssue(fp, f, val, pinned, pinnedList))
		case outputFlags[name]:
			is = append(is, Issue{Path: fp, Message: fmt.Sprintf("%q decides nvcc's output; gpuattest sets it from output: and outDir:", f), Hint: "remove the flag; set output: fatbin|cubin|ptx|object and outDir: instead"})
		case p.Release && debugFlags[name] != "":
			is = append(is, Issue{Path: fp, Message: fmt.Sprintf("%q is refused in a release pipeline: %s", f, debugFlags[name]), Hint: "remove it from the release pipeline; keep debug builds in a non-release pipeline"})
		}
	}
	return is
}

func archIssue(fp, flag, val string, pinned map[string]bool, pinnedList string) Issue {
	low := strings.ToLower(val)
	if strings.Contains(low, "native") || strings.HasPrefix(low, "all") {
		return Issue{Path: fp, Message: fmt.Sprintf("%q builds for whatever GPUs the build machine or toolkit has, not for the pinned targets", flag),
			Hint: fmt.Sprintf("remove it: gpuattest passes one -gencode per pinned target (targets: [%s])", pinnedList)}
	}
	var extra []string
	for _, m := range archNameRE.FindAllStringSubmatch(val, -1) {
		sm := "sm_" + m[1]
		if !pinned[sm] && !contains(extra, sm) {
			extra = append(extra, sm)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		return Issue{Path: fp, Message: fmt.Sprintf("%q adds architecture %s, which is not a pinned target (targets: [%s])", flag, strings.Join(extra, ", "), pinnedList),
			Hint: fmt.Sprintf("remove the flag, or add %s to the pipeline's targets so it is built and attested like the others", strings.Join(extra, ", "))}
	}
	return Issue{Path: fp, Message: fmt.Sprintf("%q selects architectures; gpuattest derives them from targets: [%s]", flag, pinnedList),
		Hint: "remove the flag: every pinned target already gets its own -gencode"}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// baseName is a source's file name without directory and extension.
func baseName(src string) string {
	b := path.Base(strings.ReplaceAll(src, "\\", "/"))
	if ext := path.Ext(b); ext != "" {
		b = strings.TrimSuffix(b, ext)
	}
	return b
}
