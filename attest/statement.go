package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"

	intoto "github.com/in-toto/attestation/go/v1"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// StatementType is the in-toto Statement v1 type URI.
const StatementType = intoto.StatementTypeUri

// ManifestSubjectName is the subject name under which statements name
// the digest of the OCI release manifest they were pushed with (see
// attest/oci). It names no artifact: coverage and per-artifact checks
// skip it.
const ManifestSubjectName = "oci:release-manifest"

// LegacyStatementType is the in-toto Statement v0.1 type URI, which
// cosign attest-blob still writes; ParseStatement accepts it.
const LegacyStatementType = "https://in-toto.io/Statement/v0.1"

// Statement is an in-toto Statement v1. The predicate is kept as raw JSON
// so that the signed bytes are exactly the ones Marshal returns.
type Statement struct {
	// Type is StatementType.
	Type string `json:"_type"`
	// Subject lists the attested artifacts.
	Subject []Subject `json:"subject"`
	// PredicateType is the predicate's type URI.
	PredicateType string `json:"predicateType"`
	// Predicate is the predicate as JSON.
	Predicate json.RawMessage `json:"predicate"`
}

// Subject is an attested artifact by name and digests.
type Subject struct {
	// Name is the artifact's name (its path relative to the run).
	Name string `json:"name"`
	// Digest maps algorithm ("sha256") to lowercase hex digest.
	Digest map[string]string `json:"digest"`
}

// Marshal returns the statement's JSON, the bytes that are signed.
func (s *Statement) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encoding statement: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Validate checks s against in-toto's Statement v1 rules (type, subjects
// with digests, predicate type, predicate an object).
func (s *Statement) Validate() error {
	b, err := s.Marshal()
	if err != nil {
		return err
	}
	_, err = ParseStatement(b)
	return err
}

// Image is a container image the run used, named without any local path.
type Image struct {
	// Name is the image's name in the pipeline.
	Name string
	// URI names the image: oci://REPO@sha256:<manifest> for a registry
	// image, pkg:oci/NAME@sha256%3A<manifest hex> for an image carried as
	// a file (oci-layout:, docker-archive:), never its path.
	URI string
	// Digest is "sha256:<hex>" of the image manifest (a docker archive's
	// image ID).
	Digest string
	// IndexDigest is "sha256:<hex>" of the multi-platform index the
	// pipeline's reference pointed at, when it did.
	IndexDigest string
	// ConfigDigest is "sha256:<hex>" of the image config (the image ID),
	// when known.
	ConfigDigest string
	// Platform is the platform the image was resolved for (linux/amd64).
	Platform string
}

// Tool is a toolchain component (nvcc, cicc, ptxas, fatbinary).
type Tool struct {
	// Name is the tool's name.
	Name string
	// Version is its version string.
	Version string
	// SHA256 is the hex sha256 of its binary, when known.
	SHA256 string
	// Path is where the binary is, on the host or in Image.
	Path string
	// Image is the URI of the image the tool is in (Image.URI); empty for
	// the host's toolchain.
	Image string
}

// BuildStep is one build step (cuda-build or exec) as the provenance
// records it: enough to run it again.
type BuildStep struct {
	// ID is the step's id.
	ID string `json:"id"`
	// Kind is cuda-build or exec.
	Kind string `json:"kind"`
	// Needs are the steps it runs after.
	Needs []string `json:"needs,omitempty"`
	// Workdir is the directory it runs in, relative to the pipeline's
	// root ("." for the root).
	Workdir string `json:"workdir"`
	// Runner is host, docker or bwrap.
	Runner string `json:"runner"`
	// Image is the URI of the image it ran in, by digest
	// (oci://REPO@sha256:... or pkg:oci/...), never a local path; empty
	// on the host.
	Image string `json:"image,omitempty"`
	// Sources are a cuda-build step's .cu files, relative to Workdir.
	Sources []string `json:"sources,omitempty"`
	// Flags are a cuda-build step's extra nvcc flags.
	Flags []string `json:"flags,omitempty"`
	// Targets are the pinned targets a cuda-build step built.
	Targets []string `json:"targets,omitempty"`
	// Output is a cuda-build step's artifact type.
	Output string `json:"output,omitempty"`
	// Reproducible is a cuda-build step's reproducibility setting (check
	// or off).
	Reproducible string `json:"reproducible,omitempty"`
	// Run is an exec step's argv.
	Run []string `json:"run,omitempty"`
	// Commands are the argv of every nvcc process a cuda-build step ran,
	// in plan order, run in Workdir.
	Commands [][]string `json:"commands,omitempty"`
	// Outputs are the step's declared outputs (exec) or its artifacts
	// (cuda-build), relative to Workdir.
	Outputs []string `json:"outputs,omitempty"`
}

// Run is everything the statements say about one run, filled by the engine
// from its run record.
type Run struct {
	// ID identifies the run (the run directory's name).
	ID string
	// PipelinePath is the pipeline file's path relative to the source root.
	PipelinePath string
	// PipelineRef is an optional source reference (a git commit).
	PipelineRef string
	// PipelineDigest is "sha256:<hex>" of the pipeline file.
	PipelineDigest string
	// Source is the git source of the run, nil outside a git work tree.
	Source *Source
	// BuildSteps are the normalised build steps (cuda-build and exec) in
	// pipeline order, for the provenance.
	BuildSteps []BuildStep
	// LockDigest is "sha256:<hex>" of the lock file, empty without one.
	LockDigest string
	// SelectedSteps are the step ids the run was limited to (empty: all).
	SelectedSteps []string
	// Steps are all the run's steps in pipeline order.
	Steps []StepVerdict
	// Preflight are the preflight outcomes.
	Preflight []PreflightCheck
	// RunError is set when the run itself failed (not just a step).
	RunError string
	// Hardware is the hardware record (read from disk with
	// hardware.Decode, which checks its digest).
	Hardware *hardware.Record
	// Artifacts are the released artifacts: the statements' subjects.
	Artifacts []FileDigest
	// Results are the result files whose sha256 the predicate binds.
	Results []FileDigest
	// Byproducts are logs and reports (provenance byproducts).
	Byproducts []FileDigest
	// Coverage are the coverage reports' totals, nil without any.
	Coverage *CoverageFacts
	// Sources are the build's source files.
	Sources []FileDigest
	// Build are the build facts, nil when nothing was built.
	Build *BuildFacts
	// Benchmarks are the benchmark summaries.
	Benchmarks []BenchmarkSummary
	// Burnin are the burn-in summaries.
	Burnin []BurninSummary
	// Floors are the per-model floors the burn-in and benchmark steps
	// applied (or could not).
	Floors []AppliedFloor
	// Suites are the case names of each test, benchmark and burn-in step
	// by outcome, for the test-result statements.
	Suites []SuiteCases
	// URL links to the run (a CI job), when there is one; the
	// test-result statements carry it.
	URL string
	// Telemetry is the telemetry summary, nil without GPU steps.
	Telemetry *TelemetrySummary
	// Images are the container images the run used.
	Images []Image
	// Toolchain lists the build tools.
	Toolchain []Tool
	// StartedAt and FinishedAt bound the run.
	StartedAt time.Time
	// FinishedAt is when the run finished.
	FinishedAt time.Time
	// Version is the gpuattest version.
	Version string
	// GPUEvidence is the GPUs' evidence over the run's nonce, nil when
	// none was collected.
	GPUEvidence *GPUEvidence
}

var (
	hexSHA256    = lazyregexp.New(`^[0-9a-f]{64}$`)
	prefixSHA256 = lazyregexp.New(`^sha256:[0-9a-f]{64}$`)
)

// passingVerdicts are the step verdicts that count as passed.
var passingVerdicts = []string{"passed", "cached"}

// subjects returns the run's artifacts as statement subjects, sorted by
// name, with problems collected.
func subjects(arts []FileDigest) ([]Subject, []error) {
	var errs []error
	seen := map[string]string{}
	var out []Subject
	for i, a := range arts {
		switch {
		case a.Path == "":
			errs = append(errs, fmt.Errorf("artifacts[%d].path: empty", i))
			continue
		case !hexSHA256.MatchString(a.SHA256):
			errs = append(errs, fmt.Errorf("artifacts[%d].sha256 %q: expected 64 lowercase hex digits", i, a.SHA256))
			continue
		}
		if d, ok := seen[a.Path]; ok {
			if d != a.SHA256 {
				errs = append(errs, fmt.Errorf("artifacts[%d]: %s listed twice with different digests", i, a.Path))
			}
			continue
		}
		seen[a.Path] = a.SHA256
		out = append(out, Subject{Name: a.Path, Digest: map[string]string{"sha256": a.SHA256}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errs
}

// ValidationPredicateFor builds the GPU validation predicate of run.
func ValidationPredicateFor(run *Run) (*ValidationPredicate, error) {
	if run == nil {
		return nil, errors.New("nil run")
	}
	var errs []error
	var hw json.RawMessage
	switch {
	case run.Hardware == nil:
		errs = append(errs, errors.New("hardware: the run has no hardware record\nhint: the engine must capture one (pipeline/gpu) even when there is no GPU"))
	default:
		if err := run.Hardware.Verify(); err != nil {
			errs = append(errs, fmt.Errorf("hardware: %w", err))
		} else if hw, err = json.Marshal(run.Hardware); err != nil {
			errs = append(errs, fmt.Errorf("hardware: %w", err))
		}
	}
	if run.GPUEvidence != nil {
		errs = append(errs, run.GPUEvidence.Validate()...)
	}
	if !prefixSHA256.MatchString(run.PipelineDigest) {
		errs = append(errs, fmt.Errorf("pipeline_digest %q: expected sha256:<64 hex digits>", run.PipelineDigest))
	}
	if run.LockDigest != "" && !prefixSHA256.MatchString(run.LockDigest) {
		errs = append(errs, fmt.Errorf("lock_digest %q: expected sha256:<64 hex digits>", run.LockDigest))
	}
	if len(run.Steps) == 0 {
		errs = append(errs, errors.New("steps: the run has no steps"))
	}
	p := &ValidationPredicate{
		Hardware:         hw,
		Build:            normalizeBuild(run.Build),
		Coverage:         run.Coverage,
		Benchmarks:       run.Benchmarks,
		Burnin:           run.Burnin,
		Floors:           run.Floors,
		Telemetry:        run.Telemetry,
		Preflight:        run.Preflight,
		Source:           run.Source,
		PipelineDigest:   run.PipelineDigest,
		LockDigest:       run.LockDigest,
		StartedAt:        run.StartedAt.UTC(),
		FinishedAt:       run.FinishedAt.UTC(),
		GpuattestVersion: run.Version,
		RunID:            run.ID,
		GPUEvidence:      run.GPUEvidence,
		RunError:         run.RunError,
		FailedSteps:      []string{},
		Results:          []FileDigest{},
		Steps:            []StepVerdict{},
	}
	if run.Hardware != nil {
		p.Simulated = run.Hardware.Simulated
	}
	for i, r := range run.Results {
		if !hexSHA256.MatchString(r.SHA256) {
			errs = append(errs, fmt.Errorf("results[%d].sha256 %q: expected 64 lowercase hex digits", i, r.SHA256))
			continue
		}
		p.Results = append(p.Results, FileDigest{Path: r.Path, SHA256: r.SHA256, Step: r.Step, Kind: r.Kind})
	}
	for i, s := range run.Steps {
		if s.ID == "" || s.Verdict == "" {
			errs = append(errs, fmt.Errorf("steps[%d]: id and verdict are required", i))
			continue
		}
		s.Devices = nonNil(s.Devices)
		p.Steps = append(p.Steps, s)
		if !slices.Contains(passingVerdicts, s.Verdict) {
			p.FailedSteps = append(p.FailedSteps, s.ID)
		}
	}
	for _, c := range run.Preflight {
		if c.Status == "failed" && !slices.Contains(p.FailedSteps, "preflight/"+c.Check) {
			p.FailedSteps = append(p.FailedSteps, "preflight/"+c.Check)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.Result = ResultPassed
	if len(p.FailedSteps) > 0 || run.RunError != "" {
		p.Result = ResultFailed
	}
	return p, nil
}

// ValidationStatement builds the GPU validation statement of run: subjects
// are run.Artifacts, the predicate is ValidationPredicateFor(run). A run
// that did not pass yields result "failed" with its failed steps.
func ValidationStatement(run *Run) (*Statement, error) {
	p, err := ValidationPredicateFor(run)
	if err != nil {
		return nil, fmt.Errorf("building validation predicate: %w", err)
	}
	return newStatement(run.Artifacts, ValidationPredicateType, p)
}

// NewStatement builds a statement over subjects with any JSON predicate.
func NewStatement(subjects []FileDigest, predicateType string, predicate any) (*Statement, error) {
	return newStatement(subjects, predicateType, predicate)
}

func newStatement(arts []FileDigest, predicateType string, predicate any) (*Statement, error) {
	subj, errs := subjects(arts)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(subj) == 0 {
		return nil, errors.New("no subjects: the run released no artifacts\nhint: cuda-build steps list their outputs as artifacts")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(predicate); err != nil {
		return nil, fmt.Errorf("encoding predicate: %w", err)
	}
	s := &Statement{
		Type:          StatementType,
		Subject:       subj,
		PredicateType: predicateType,
		Predicate:     json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))),
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// normalizeBuild copies b with nil lists made empty, so that the predicate
// has arrays where its schema wants them, never null.
func normalizeBuild(b *BuildFacts) *BuildFacts {
	if b == nil {
		return nil
	}
	out := *b
	out.Targets = nonNil(b.Targets)
	out.Artifacts = make([]BuildArtifact, len(b.Artifacts))
	for i, a := range b.Artifacts {
		a.SASSArchs = nonNil(a.SASSArchs)
		a.PTXArchs = nonNil(a.PTXArchs)
		out.Artifacts[i] = a
	}
	return &out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
