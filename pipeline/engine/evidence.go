package engine

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// gpuEvidence collects the GPUs' evidence before the first gpu: true
// step of this attempt (once; the steps that start meanwhile wait) and
// returns the collector's verdict, which fails every gpu: true step when
// it is an error.
func (e *run) gpuEvidence(ctx context.Context) error {
	if e.o.evidence == nil {
		return nil
	}
	e.evidenceOnce.Do(func() {
		e.evidenceErr = e.collectEvidence(ctx)
	})
	return e.evidenceErr
}

// gpuEvidenceAtEnd collects the evidence of a run that had no gpu: true
// step to collect it before, unless the run was interrupted.
func (e *run) gpuEvidenceAtEnd(ctx context.Context) error {
	if e.o.evidence == nil || ctx.Err() != nil {
		return nil
	}
	e.evidenceOnce.Do(func() {
		e.evidenceErr = e.collectEvidence(ctx)
	})
	return e.evidenceErr
}

// collectEvidence asks the collector, over the run's ID and the digests
// of the artifacts the passed steps recorded so far, and keeps its record
// in run.json.
func (e *run) collectEvidence(ctx context.Context) error {
	var arts []string
	e.rec.update(func(r *Record) {
		for _, s := range r.Steps {
			if s.State != runtypes.Passed {
				continue
			}
			for _, a := range s.Artifacts {
				arts = append(arts, "sha256:"+a.SHA256)
			}
		}
	})
	slices.Sort(arts)
	arts = slices.Compact(arts)
	record, err := e.o.evidence.Collect(ctx, e.dir, filepath.Base(filepath.Clean(e.abs)), arts)
	if record != nil {
		e.rec.update(func(r *Record) { r.GPUEvidence = record })
	}
	return err
}
