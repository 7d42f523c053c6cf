package report

import (
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// Report is what a report shows, gathered from a run directory (FromRun)
// or from a verified attestation bundle (FromVerification). Its renderers
// (WriteHTML, WriteMarkdown, WritePNGs) escape every string in it.
type Report struct {
	// Source is the run directory or the bundle file.
	Source string
	// FromBundle is true for a report of a verified bundle: it shows only
	// what the signed predicate says.
	FromBundle bool
	// Pipeline is the pipeline's name; PipelineDigest its digest.
	Pipeline       string
	PipelineDigest string
	// Version is the gpuattest version that made the run.
	Version string
	// StartedAt and FinishedAt bound the run; FinishedAt is zero while it
	// runs.
	StartedAt, FinishedAt time.Time
	// Verdict is the run's (or the verified predicate's) outcome.
	Verdict Verdict
	// Warnings are the loud facts a reader must not miss: simulated
	// hardware, results from the CPU backend.
	Warnings []string
	// Hardware is the hardware record; nil when there is none.
	Hardware *hardware.Record
	// Steps are the steps in run order.
	Steps []Step
	// Builds are the cuda-build facts, and the device code of each exec
	// step's released outputs (Output "exec outputs").
	Builds []Build
	// Benchmarks are the benchmark steps.
	Benchmarks []Benchmark
	// Burnins are the burn-in steps.
	Burnins []Burnin
	// Telemetry is the GPU telemetry of each gpu: true step.
	Telemetry []Telemetry
	// PredicateTelemetry is a verified predicate's telemetry summary (the
	// series themselves are not in a predicate).
	PredicateTelemetry *attest.TelemetrySummary
	// Preflight are a verified predicate's preflight checks.
	Preflight []attest.PreflightCheck
	// Subjects are the attested artifacts; SubjectsNote says where they
	// come from (a verified bundle, or a run's signed file read without
	// verifying it).
	Subjects     []Subject
	SubjectsNote string
	// Verification is what a bundle report verified; nil for a run.
	Verification *Verification
	// Fleet is a fleet run's dispatch, one row per node; nil for a run
	// on one machine. The rest of the report is then the build's, which
	// ran once on the submitting machine.
	Fleet *Fleet
}

// Fleet is a fleet run's dispatch (run --fleet) and its nodes.
type Fleet struct {
	// Dispatch is the dispatch's ID; DispatchDigest its statement's.
	Dispatch, DispatchDigest string
	// Cluster names the cluster: engine, name and version.
	Cluster string
	// Collected is false while the jobs run or were never collected; the
	// rows then show the scheduler's last known states.
	Collected bool
	// Passed is true when every job reported once, signed by its key,
	// passed on its class's hardware, and every target is covered.
	Passed bool
	// Nodes has one row per job of the dispatch, in its order.
	Nodes []FleetNode
	// Problems are the dispatch's failures, one line each.
	Problems []string
}

// FleetNode is one job of a dispatch and the node it ran on.
type FleetNode struct {
	// Job is CLASS-INDEX; Class its node class.
	Job, Class string
	// Node is the node's name; JobID the scheduler's job ID.
	Node, JobID string
	// GPU describes the node's GPUs from its bundle (count, name,
	// compute capability, simulated).
	GPU string
	// Verdict is passed, failed, missing or duplicate (or the
	// scheduler's state when not collected); Reason says why it did not
	// pass.
	Verdict, Reason string
}

// Verdict is a run's outcome.
type Verdict struct {
	// State is passed, failed, error, interrupted or running.
	State string
	// Passed is true when State is passed.
	Passed bool
	// Warned is true when the run passed with warnings: an enforced gate
	// ended AMBIGUOUS under gate.onAmbiguous: warn.
	Warned bool
	// Reason is the run's reason, when it did not pass.
	Reason string
	// Failures name what did not pass, one line each (step: reason).
	Failures []string
}

// Step is one step of the timeline.
type Step struct {
	ID, Kind, State string
	// Start and End bound the step; zero when it never ran.
	Start, End time.Time
	// Duration is End - Start.
	Duration time.Duration
	// Cache is hit, miss or off.
	Cache string
	// Reason says why a step did not pass.
	Reason string
	// ExitCode is the main process's exit code, when there was one.
	ExitCode *int
	// Runner is the runner it ran on.
	Runner string
}

// Build is one cuda-build step's facts.
type Build struct {
	// Step is the step id.
	Step string
	// Targets are the pinned targets; Output the output kind.
	Targets []string
	Output  string
	// Artifacts are what cuobjdump found in each output.
	Artifacts []*runtypes.Inspection
	// ArchProblems are SASS/PTX sets that differ from the pinned ones.
	ArchProblems []string
	// Reproducible is nil when the check did not run.
	Reproducible *bool
	// Repro is the reproducibility report (nil when the check did not run
	// or the report comes from a bundle).
	Repro *cuda.ReproReport
	// Cached is true when the step was restored from the build cache.
	Cached bool
}

// Benchmark is one benchmark step.
type Benchmark struct {
	// Step is the step id.
	Step string
	// Backend and Device ran the candidate.
	Backend, Device string
	// Against is "reference", "baseline" or "" (no comparison).
	Against string
	// AgainstLabel describes it ("same-run reference, 30 rounds, ABBA").
	AgainstLabel string
	// Gate is the threshold and alpha the verdicts used.
	Gate *stats.Gate
	// Refused says why a baseline comparison was not made.
	Refused string
	// Cases are the candidate's cases.
	Cases []BenchCase
}

// BenchCase is one benchmark case: its samples and its verdict.
type BenchCase struct {
	// Name is the case key.
	Name string
	// Status is the case's worst status.
	Status string
	// Samples are the candidate's raw samples in ns (nil from a bundle).
	Samples []float64
	// Against are the reference's raw samples in ns (nil for a baseline:
	// only its median is known, AgainstMedian).
	Against       []float64
	AgainstMedian float64
	// Stats summarises Samples.
	Stats *stats.Summary
	// Comparison is the verdict against the reference or baseline; nil
	// when there is none.
	Comparison *stats.Comparison
	// Enforced is true when a SLOWER verdict fails the step.
	Enforced bool
}

// Burnin is one burn-in step.
type Burnin struct {
	// Step is the step id; State its final state.
	Step, State string
	// Details are the burn-in facts (nil from a bundle).
	Details *suite.BurninDetails
	// Requested, Elapsed, Iterations, Failures summarise it.
	Requested, Elapsed string
	Iterations         int
	Failures           int
	// OutputConsistent and LeakDetected are the predicate's verdicts.
	OutputConsistent, LeakDetected bool
}

// Telemetry is one step's GPU telemetry.
type Telemetry struct {
	// Step is the step id.
	Step string
	// Summary is the engine's summary (nil when the step has none).
	Summary *gpu.Summary
	// Lines are telemetry.jsonl's samples and events.
	Lines []runtypes.TelemetryLine
	// Simulated is true when the samples come from simulated GPUs.
	Simulated bool
}

// Subject is one attested artifact.
type Subject struct {
	// Name is the subject name; Digest its "sha256:<hex>".
	Name, Digest string
	// PredicateType is the statement's predicate type.
	PredicateType string
}

// Verification is what verifying a bundle found.
type Verification struct {
	// Verified is true when every check passed.
	Verified bool
	// Result is PASSED or FAILED.
	Result string
	// Policy names the policy applied.
	Policy string
	// PredicateType is the predicate type required.
	PredicateType string
	// Criteria are what was enforced, with their results.
	Criteria []verify.Criterion
	// Checks are every check with its outcome.
	Checks []verify.Check
	// Bundles are the bundles read.
	Bundles []verify.BundleResult
	// Artifacts are the artifacts checked against the subjects.
	Artifacts []verify.Artifact
	// VerifiedAt is when the verification ran.
	VerifiedAt time.Time
}
