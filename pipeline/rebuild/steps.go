package rebuild

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// selectSteps limits p to the recorded cuda-build steps, the exec steps
// that released outputs (attestation subjects, like a cuda-build's
// artifacts) and the steps they need (exec or cuda-build), in pipeline
// order, and turns their reproducibility check off (the rebuild compares with the recorded
// digests instead). It returns the ids kept.
func selectSteps(p *pipeline.Pipeline, recorded []attest.BuildStep) ([]string, error) {
	byID := map[string]*pipeline.Step{}
	for i := range p.Steps {
		byID[p.Steps[i].ID] = &p.Steps[i]
	}
	keep := map[string]bool{}
	var visit func(id, from string) error
	visit = func(id, from string) error {
		s, ok := byID[id]
		if !ok {
			return fmt.Errorf("%w: %s: the pipeline has no step %q", ErrSourceMismatch, from, id)
		}
		if kind := kindOf(s); kind != pipeline.KindExec && kind != pipeline.KindCUDABuild {
			return fmt.Errorf("%w: step %s needs step %s of kind %s, which is not a build step", ErrNotRebuildable, from, id, kind)
		}
		if keep[id] {
			return nil
		}
		keep[id] = true
		for _, n := range s.Needs {
			if err := visit(n, "steps."+id+".needs"); err != nil {
				return err
			}
		}
		return nil
	}
	for i, bs := range recorded {
		if bs.Kind != pipeline.KindCUDABuild && (bs.Kind != pipeline.KindExec || len(bs.Outputs) == 0) {
			continue
		}
		if err := visit(bs.ID, fmt.Sprintf("buildSteps[%d]", i)); err != nil {
			return nil, err
		}
	}
	var steps []pipeline.Step
	var ids []string
	for _, s := range p.Steps {
		if !keep[s.ID] {
			continue
		}
		s.Reproducible = "off"
		steps = append(steps, s)
		ids = append(ids, s.ID)
	}
	p.Steps = steps
	return ids, nil
}

func kindOf(s *pipeline.Step) string {
	if s.Kind == "" {
		return pipeline.KindExec
	}
	return s.Kind
}

// hostTools are the toolchain binaries whose digests a host rebuild must
// match.
var hostTools = append([]string{"nvcc"}, cuda.DrivenTools...)

// checkHostToolchain refuses a rebuild of host cuda-build steps when this
// host's nvcc, cicc, ptxas or fatbinary differ from the host toolchain
// the provenance records (resolved dependencies without an image).
func checkHostToolchain(ctx context.Context, p *pipeline.Pipeline, deps []attest.ResourceDescriptor) error {
	onHost := slices.ContainsFunc(p.Steps, func(s pipeline.Step) bool {
		r := s.Runner
		if r == "" {
			r = p.Runner
		}
		return s.Kind == pipeline.KindCUDABuild && (r == "" || r == "host")
	})
	if !onHost {
		return nil
	}
	want := map[string]string{}
	for _, d := range deps {
		if slices.Contains(hostTools, d.Name) && d.Annotations["image"] == "" && d.Digest["sha256"] != "" {
			want[d.Name] = d.Digest["sha256"]
		}
	}
	if len(want) == 0 {
		return fmt.Errorf("%w: the provenance records no digest of the host's nvcc, so no host toolchain can be shown to match\nhint: rebuild provenance made by a gpuattest that fingerprints toolchains", ErrToolchainMismatch)
	}
	tc, err := cuda.Fingerprint(ctx, &runner.Host{})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrToolchainMismatch, err)
	}
	have := map[string]string{"nvcc": tc.NVCCBinarySHA256}
	if have["nvcc"] == "" {
		have["nvcc"] = tc.NVCCSHA256
	}
	for _, t := range tc.Tools {
		have[t.Name] = t.SHA256
	}
	var bad []string
	for _, name := range hostTools {
		if w, ok := want[name]; ok && have[name] != w {
			bad = append(bad, fmt.Sprintf("%s: sha256 %s here, %s recorded", name, orNone(have[name]), w))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w:\n  %s\nhint: rebuild on a host with the recorded CUDA toolkit (%s), or pin the build to an image", ErrToolchainMismatch, strings.Join(bad, "\n  "), tc.Release)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// compareSteps notes where a rebuilt step's nvcc commands differ from the
// recorded ones, and returns an error when a step ran in another image
// than the recorded one (a tag that moved since).
func compareSteps(recorded, rebuilt []attest.BuildStep) ([]string, error) {
	var notes, wrong []string
	for _, r := range rebuilt {
		i := slices.IndexFunc(recorded, func(s attest.BuildStep) bool { return s.ID == r.ID })
		if i < 0 {
			continue
		}
		o := recorded[i]
		if o.Image != r.Image {
			wrong = append(wrong, fmt.Sprintf("step %s ran in image %s, the provenance records %s", r.ID, orNone(r.Image), orNone(o.Image)))
		}
		if !slices.EqualFunc(o.Commands, r.Commands, slices.Equal[[]string]) {
			notes = append(notes, fmt.Sprintf("step %s ran other nvcc commands than the provenance records", r.ID))
		}
	}
	if len(wrong) > 0 {
		return notes, fmt.Errorf("%w:\n  %s\nhint: pin the image by digest in the pipeline or its gpuattest.lock, as release: true requires", ErrImageMismatch, strings.Join(wrong, "\n  "))
	}
	return notes, nil
}
