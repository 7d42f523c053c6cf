package cuda

import (
	"fmt"
	"path"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
)

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
// at a time. It does not check flags; see [pipeline.CheckCUDABuild].
func Plan(p *pipeline.Pipeline, s *pipeline.Step) ([]Job, error) {
	targets, err := pipeline.ParseTargets(p.Targets)
	if err != nil {
		return nil, err
	}
	return plan(s, targets)
}

// plan is Plan for targets already parsed (and sorted).
func plan(s *pipeline.Step, targets []pipeline.Target) ([]Job, error) {
	ptx := s.PTX == nil || *s.PTX
	outDir := s.OutDir
	if outDir == "" {
		outDir = pipeline.DefaultOutDir
	}
	outDir = path.Clean(outDir)
	var jobs []Job
	for _, src := range s.Sources {
		base := pipeline.SourceBase(src)
		one := func(mode, out, target string, gencode []string) Job {
			args := []string{"nvcc", mode}
			args = append(args, gencode...)
			args = append(args, s.Flags...)
			args = append(args, "-o", out, src)
			return Job{Source: src, Args: args, Outputs: []string{out}, Target: target}
		}
		switch s.Output {
		case "", pipeline.OutputFatbin:
			jobs = append(jobs, one("-fatbin", path.Join(outDir, base+".fatbin"), "", GencodeArgs(targets, ptx)))
		case pipeline.OutputObject:
			jobs = append(jobs, one("-c", path.Join(outDir, base+".o"), "", GencodeArgs(targets, ptx)))
		case pipeline.OutputCubin:
			for _, t := range targets {
				jobs = append(jobs, one("-cubin", path.Join(outDir, base+"."+t.SM()+".cubin"), t.SM(), gencode(t.Compute(), t.SM())))
			}
		case pipeline.OutputPTX:
			for _, t := range targets {
				jobs = append(jobs, one("-ptx", path.Join(outDir, base+"."+t.Compute()+".ptx"), t.SM(), gencode(t.Compute(), t.Compute())))
			}
		default:
			return nil, fmt.Errorf("unknown output %q: expected fatbin, cubin, ptx or object", s.Output)
		}
	}
	return jobs, nil
}

// GencodeArgs returns nvcc's -gencode arguments for targets: one
// arch=compute_XX,code=sm_XX per target and, when ptx is set, a
// code=compute_XX for the highest target so newer GPUs can JIT it (plain
// compute_XX even for an sm_XXa target; see [pipeline.PTXTarget]).
func GencodeArgs(targets []pipeline.Target, ptx bool) []string {
	var args []string
	for _, t := range targets {
		args = append(args, gencode(t.Compute(), t.SM())...)
	}
	if hi, ok := pipeline.PTXTarget(targets); ok && ptx {
		args = append(args, gencode(hi.Compute(), hi.Compute())...)
	}
	return args
}

// gencode is one -gencode pair: the virtual architecture nvcc compiles for
// and the code (SASS or PTX) it embeds.
func gencode(arch, code string) []string {
	return []string{"-gencode", "arch=" + arch + ",code=" + code}
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
