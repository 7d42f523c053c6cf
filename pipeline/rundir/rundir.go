// Package rundir reads a run directory that gpuattest run wrote: run.json
// (engine.Record), hardware.json (through hardware.Decode, which checks
// its digest) and every step's facts, decoded once into the type of its
// kind. Attestation, resume checks and reports read runs through it
// rather than decoding run.json's parts themselves.
package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"log/slog"
	"path/filepath"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/step"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// Run is a run directory, read and decoded.
type Run struct {
	// Dir is the run directory as given.
	Dir string
	// Record is run.json.
	Record *engine.Record
	// Hardware is hardware.json; nil when the run recorded none.
	Hardware *hardware.Record
	// Toolchain is the host CUDA toolchain's fingerprint; nil when the
	// run recorded none (no cuda-build on the host) or it was an error.
	Toolchain *cuda.Toolchain
	// Steps are run.json's steps with their facts, in its order.
	Steps []*Step
}

// Step is one step of run.json with its facts decoded by kind. At most
// one of the kind fields is set, matching Kind.
type Step struct {
	*engine.StepRecord
	// Exec are an exec step's facts.
	Exec *engine.ExecDetails
	// Outputs are the device-code check of an exec step's outputs
	// (Exec.Outputs, decoded).
	Outputs *cuda.OutputsReport
	// Build are a cuda-build step's facts.
	Build *cuda.BuildDetails
	// Test are a test step's facts.
	Test *suite.TestDetails
	// Benchmark are a benchmark step's facts (without raw samples: those
	// are in the step's benchmark.json).
	Benchmark *suite.BenchmarkDetails
	// Burnin are a burn-in step's facts.
	Burnin *suite.BurninDetails
	// Profile are a profile step's facts.
	Profile *suite.ProfileDetails
	// Preflight is the GPU preflight report of a gpu: true step.
	Preflight *gpu.PreflightReport
	// Telemetry is the GPU telemetry summary of a gpu: true step.
	Telemetry *gpu.Summary
}

// Open reads the run in dir.
func Open(dir string) (*Run, error) {
	rec, err := engine.ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, Record: rec}
	if ref := rec.Hardware; ref != nil {
		if r.Hardware, err = readHardware(dir, ref); err != nil {
			return nil, err
		}
	}
	if rec.Toolchain != nil {
		r.Toolchain = decodeToolchain(rec.Toolchain)
	}
	for _, sr := range rec.Steps {
		st, err := DecodeStep(sr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", runlayout.Record(dir), err)
		}
		r.Steps = append(r.Steps, st)
	}
	return r, nil
}

// Step returns the step with id, or nil.
func (r *Run) Step(id string) *Step {
	for _, s := range r.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// readHardware reads the hardware record run.json points at and checks
// that it is the record the run used.
func readHardware(dir string, ref *engine.HardwareRef) (*hardware.Record, error) {
	path := filepath.Join(dir, filepath.Base(ref.File))
	raw, err := limits.ReadFile(path, limits.RecordBytes, "hardware record")
	if err != nil {
		return nil, fmt.Errorf("reading the hardware record: %w", err)
	}
	rec, err := hardware.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if rec.Digest != ref.Digest {
		return nil, fmt.Errorf("%s: digest %s, but run.json records %s", path, rec.Digest, ref.Digest)
	}
	return rec, nil
}

// decodeToolchain reads the toolchain run.json recorded; nil when it is
// not a fingerprint (the fingerprint failed).
func decodeToolchain(v any) *cuda.Toolchain {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var tc cuda.Toolchain
	if json.Unmarshal(b, &tc) != nil || tc.NVCC == "" {
		return nil
	}
	return &tc
}

// DecodeStep decodes a step record's details by its kind, and its
// preflight report and telemetry summary.
func DecodeStep(sr *engine.StepRecord) (*Step, error) {
	st := &Step{StepRecord: sr}
	if err := decode(sr.Preflight, &st.Preflight); err != nil {
		return nil, fmt.Errorf("step %s: preflight: %w", sr.ID, err)
	}
	if err := decode(sr.Telemetry, &st.Telemetry); err != nil {
		return nil, fmt.Errorf("step %s: telemetry: %w", sr.ID, err)
	}
	var err error
	switch sr.Kind {
	case pipeline.KindExec:
		if err = decode(sr.Details, &st.Exec); err == nil && st.Exec != nil {
			err = decode(st.Exec.Outputs, &st.Outputs)
		}
	case pipeline.KindCUDABuild:
		err = decode(sr.Details, &st.Build)
	case pipeline.KindTest:
		err = decode(sr.Details, &st.Test)
	case pipeline.KindBenchmark:
		err = decode(sr.Details, &st.Benchmark)
	case pipeline.KindBurnin:
		err = decode(sr.Details, &st.Burnin)
	case pipeline.KindProfile:
		err = decode(sr.Details, &st.Profile)
	default:
		if len(sr.Details) > 0 {
			err = fmt.Errorf("unknown kind %q", sr.Kind)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("step %s: %s details: %w", sr.ID, sr.Kind, err)
	}
	return st, nil
}

// decode strictly decodes raw into *dst (allocated), leaving it nil for
// no data. Unknown fields are an error: a run.json written by another
// version, or edited, is not read as if it were ours.
func decode[T any](raw json.RawMessage, dst **T) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	v := new(T)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	*dst = v
	return nil
}

// Recheck re-derives the verdict of every test and benchmark step the run
// records as passed, from the result files in its step directory, each
// checked against its recorded digest, and the step's spec in p (see
// suite.Recheck). Burn-ins must record no failed iteration and no output
// mismatch. It returns an error naming every step whose record does not
// hold: a run.json edited to turn a failure into a pass is not signed.
func (r *Run) Recheck(p *pipeline.Pipeline) error {
	if r.Record.Pipeline.Digest != p.Digest {
		return fmt.Errorf("run %s was made from a different pipeline (digest %s, %s is %s)", r.Dir, r.Record.Pipeline.Digest, p.Path, p.Digest)
	}
	abs, err := filepath.Abs(r.Dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := range p.Steps {
		s := &p.Steps[i]
		st := r.Step(s.ID)
		if st == nil || st.State != runtypes.Passed {
			continue
		}
		if st.Kind != s.Kind {
			errs = append(errs, fmt.Errorf("step %s: run.json records kind %s, the pipeline says %s", s.ID, st.Kind, s.Kind))
			continue
		}
		var err error
		switch s.Kind {
		case pipeline.KindTest, pipeline.KindBenchmark:
			sc := &step.Context{Pipeline: p, Step: s, Root: p.Root, WorkDir: filepath.Join(p.Root, filepath.FromSlash(s.Workdir)),
				StepDir: runlayout.StepDir(abs, s.ID), Hardware: r.Hardware, Logger: slog.New(slog.DiscardHandler)}
			err = suite.Recheck(sc, st.Results, st.ExitCode)
		case pipeline.KindBurnin:
			err = recheckBurnin(st)
		case pipeline.KindExec:
			if st.Outputs != nil && len(st.Outputs.Problems) > 0 {
				err = fmt.Errorf("its outputs' check records a problem: %s", st.Outputs.Problems[0])
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("step %s is recorded as passed, but %w", s.ID, err))
		}
	}
	return errors.Join(errs...)
}

// recheckBurnin checks a passed burn-in's recorded facts.
func recheckBurnin(st *Step) error {
	d := st.Burnin
	switch {
	case d == nil:
		return errors.New("run.json records no burn-in facts for it")
	case d.FailedIteration > 0:
		return fmt.Errorf("run.json records iteration %d as failed", d.FailedIteration)
	case len(d.Mismatches) > 0:
		return fmt.Errorf("run.json records output mismatches: %s", d.Mismatches[0])
	}
	return nil
}
