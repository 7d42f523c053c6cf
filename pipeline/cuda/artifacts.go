package cuda

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// ArchDiff is how the architectures of one kind of device code (SASS or
// PTX) in an artifact differ from those expected.
type ArchDiff struct {
	// Code is "SASS" or "PTX".
	Code string
	// Got and Want are the architectures found and expected.
	Got, Want []string
	// Extra are found but not expected, Missing expected but not found;
	// both sorted.
	Extra, Missing []string
}

// CompareArchs returns how the architectures got of one kind of code
// differ from want, or nil when both hold the same set.
func CompareArchs(code string, got, want []string) *ArchDiff {
	d := &ArchDiff{Code: code, Got: got, Want: want}
	for _, g := range got {
		if !slices.Contains(want, g) {
			d.Extra = append(d.Extra, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			d.Missing = append(d.Missing, w)
		}
	}
	if len(d.Extra) == 0 && len(d.Missing) == 0 {
		return nil
	}
	sortArchs(d.Extra)
	sortArchs(d.Missing)
	return d
}

// String says how the sets differ, e.g. "SASS architectures [sm_80 sm_86]
// do not match the expected [sm_80]: extra sm_86"; "" for a nil diff.
func (d *ArchDiff) String() string {
	if d == nil {
		return ""
	}
	msg := fmt.Sprintf("%s architectures [%s] do not match the expected [%s]", d.Code, strings.Join(d.Got, " "), strings.Join(d.Want, " "))
	if len(d.Extra) > 0 {
		msg += ": extra " + strings.Join(d.Extra, ", ")
	}
	if len(d.Missing) > 0 {
		if len(d.Extra) > 0 {
			msg += ","
		} else {
			msg += ":"
		}
		msg += " missing " + strings.Join(d.Missing, ", ")
	}
	return msg
}

// CheckSASS compares the SASS architectures in in with targets, or
// returns nil when they are the same set.
func CheckSASS(in *runtypes.Inspection, targets []pipeline.Target) *ArchDiff {
	return CompareArchs("SASS", in.SASS, smNames(targets))
}

// smNames returns the SASS names of targets.
func smNames(targets []pipeline.Target) []string {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.SM()
	}
	return names
}

// expectedArchs returns the SASS and PTX architectures an artifact of a
// cuda-build step holds: for fatbins and objects, SASS for every target
// and PTX for [pipeline.PTXTarget] when ptx is set; for a cubin or PTX
// file, the code of its own target (the job's).
func expectedArchs(output string, targets []pipeline.Target, ptx bool, jobTarget string) (sass, ptxs []string, err error) {
	switch output {
	case pipeline.OutputCubin, pipeline.OutputPTX:
		t, err := pipeline.ParseTarget(jobTarget)
		if err != nil {
			return nil, nil, err
		}
		if output == pipeline.OutputCubin {
			return []string{t.SM()}, nil, nil
		}
		return nil, []string{t.Compute()}, nil
	}
	if hi, ok := pipeline.PTXTarget(targets); ok && ptx {
		ptxs = []string{hi.Compute()}
	}
	return smNames(targets), ptxs, nil
}

// checkArchs compares an artifact's architectures with what the step pins;
// it returns "" when they match.
func checkArchs(in *runtypes.Inspection, output string, targets []pipeline.Target, ptx bool, jobTarget string) string {
	wantSASS, wantPTX, err := expectedArchs(output, targets, ptx, jobTarget)
	if err != nil {
		return fmt.Sprintf("%s: %v", in.Path, err)
	}
	var msgs []string
	for _, d := range []*ArchDiff{CompareArchs("SASS", in.SASS, wantSASS), CompareArchs("PTX", in.PTX, wantPTX)} {
		if d != nil {
			msgs = append(msgs, d.String())
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s (pinned targets: [%s])", in.Path, strings.Join(msgs, "; "), strings.Join(smNames(targets), " "))
}

// inspectOutputs inspects every output of jobs (in parallel, like the
// builds; results keep plan order), records them in det and checks each
// against the pinned targets. The outcome fails when an artifact's
// architectures differ from them.
func (b *Build) inspectOutputs(ctx context.Context, s *step.Context, env []string, jobs []Job, targets []pipeline.Target, det *BuildDetails) (*step.Outcome, error) {
	type item struct{ out, target string }
	var items []item
	for _, j := range jobs {
		for _, o := range j.Outputs {
			items = append(items, item{o, j.Target})
		}
	}
	t0 := time.Now()
	ins := make([]*runtypes.Inspection, len(items))
	errs := make([]error, len(items))
	forEach(b.Jobs, len(items), func(i int) {
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
	}
	return out, nil
}
