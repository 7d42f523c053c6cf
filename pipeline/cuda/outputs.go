package cuda

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// Outputs checks the device code in the outputs an exec step releases
// (step.OutputChecker): each output that holds device code (Scan) is
// inspected with cuobjdump as a cuda-build's artifacts are, and must
// carry SASS for every pinned target; the others are listed as holding
// none. A step with hostOnly: true releases its outputs uninspected.
type Outputs struct{}

var _ step.OutputChecker = Outputs{}

// OutputsReport is what the check of a step's outputs found: the
// "outputs" of an exec step's details in run.json.
type OutputsReport struct {
	// Targets are the pinned targets the outputs were checked against.
	Targets []string `json:"targets"`
	// HostOnly is true when the step said its outputs hold no device
	// code (hostOnly: true): they were not inspected.
	HostOnly bool `json:"host_only,omitempty"`
	// Files are the outputs, in the step's order.
	Files []OutputFile `json:"files"`
	// Reproducibility is the second build's comparison, with
	// reproducible: check.
	Reproducibility *ReproReport `json:"reproducibility,omitempty"`
	// Problems fail the step: a pinned target missing from an output
	// (naming the file and the target), an output that cannot be read,
	// outputs that differ between two builds.
	Problems []string `json:"problems,omitempty"`
}

// OutputFile is one released output and the device code it holds.
type OutputFile struct {
	// Path is relative to the step's work dir (slash-separated).
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file's bytes.
	SHA256 string `json:"sha256"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Kind is what the file is (Scan's kinds; "link" for a symbolic
	// link, "host-only" for a file not inspected).
	Kind string `json:"kind"`
	// DeviceCode is true when the file holds device code.
	DeviceCode bool `json:"device_code"`
	// SASS, PTX and Cubins are what cuobjdump found in it (see
	// Inspection); empty without device code.
	SASS   []string         `json:"sass,omitempty"`
	PTX    []string         `json:"ptx,omitempty"`
	Cubins []runtypes.Cubin `json:"cubins,omitempty"`
	// Missing are the pinned targets it has no SASS for.
	Missing []string `json:"missing,omitempty"`
}

// CheckOutputs scans and inspects outputs (see Outputs).
func (Outputs) CheckOutputs(ctx context.Context, s *step.Context, outputs []step.File) (*step.OutputCheck, error) {
	var targets []pipeline.Target
	rep := &OutputsReport{Targets: []string{}, HostOnly: s.Step.HostOnly}
	if s.Pipeline != nil {
		for _, name := range s.Pipeline.Targets {
			t, err := pipeline.ParseTarget(name)
			if err != nil {
				return nil, fmt.Errorf("step %s: pinned target %q: %w", s.Step.ID, name, err)
			}
			targets = append(targets, t)
			rep.Targets = append(rep.Targets, name)
		}
	}
	chk := &step.OutputCheck{Details: rep}
	for _, o := range outputs {
		of := OutputFile{Path: o.Path, SHA256: o.SHA256, Size: o.Size}
		switch {
		case o.Link != "":
			of.Kind = "link"
		case rep.HostOnly:
			of.Kind = "host-only"
		default:
			if err := inspectOutput(ctx, s, &of, targets); err != nil {
				rep.Problems = append(rep.Problems, err.Error())
			}
		}
		rep.Files = append(rep.Files, of)
		chk.Artifacts = append(chk.Artifacts, step.File{Path: o.Path, SHA256: o.SHA256, Size: o.Size, Kind: of.Kind, Link: o.Link, Mode: o.Mode})
	}
	for _, f := range rep.Files {
		for _, m := range f.Missing {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: no SASS for pinned target %s (it holds SASS [%s], PTX [%s])\nhint: build it with -gencode arch=compute_XX,code=sm_XX for every pinned target, or declare the step hostOnly: true if this output is not released device code",
				f.Path, m, strings.Join(f.SASS, " "), strings.Join(f.PTX, " ")))
		}
	}
	if s.Step.Reproducible == "check" {
		r, err := reproduceExec(ctx, s, outputs)
		switch {
		case err != nil:
			rep.Problems = append(rep.Problems, "reproducibility check: "+err.Error())
		case !r.Reproducible:
			rep.Problems = append(rep.Problems, reproProblem(r))
		}
		rep.Reproducibility = r
	}
	chk.Problems = rep.Problems
	return chk, nil
}

// inspectOutput fills of from the file: its kind, and, when it holds
// device code, what cuobjdump finds in it and the pinned targets it
// lacks. An error names the file; the check fails on it.
func inspectOutput(ctx context.Context, s *step.Context, of *OutputFile, targets []pipeline.Target) error {
	abs := filepath.Join(s.WorkDir, filepath.FromSlash(of.Path))
	res, err := Scan(abs)
	of.Kind = res.Kind
	if err != nil {
		return fmt.Errorf("%s: %v\nhint: an output that cannot be read cannot be checked for device code", of.Path, err)
	}
	if !res.DeviceCode {
		return nil
	}
	of.DeviceCode = true
	in, err := Inspect(ctx, s.Runner, abs, WithEnv(s.Env), WithImage(s.Image), WithTempDir(s.StepDir))
	if err != nil {
		return fmt.Errorf("%s: inspecting its device code: %v", of.Path, err)
	}
	if in.SHA256 != of.SHA256 {
		return fmt.Errorf("%s: changed while it was inspected (sha256 %s, recorded %s)", of.Path, in.SHA256, of.SHA256)
	}
	of.SASS, of.PTX, of.Cubins = in.SASS, in.PTX, in.Cubins
	switch of.Kind {
	case FilePTX:
		// PTX text carries no SASS; its targets are listed, not required.
	case FileCubin:
		if len(targets) > 0 && !slices.Contains(smNames(targets), in.SASS[0]) {
			return fmt.Errorf("%s: a cubin for %s, which is not a pinned target [%s]", of.Path, in.SASS[0], strings.Join(smNames(targets), " "))
		}
	default:
		for _, t := range smNames(targets) {
			if !slices.Contains(in.SASS, t) {
				of.Missing = append(of.Missing, t)
			}
		}
	}
	return nil
}
