package attest

import (
	"encoding/json"
	"time"
)

// ValidationPredicateType is the predicate type URI of the GPU validation
// predicate. Version 2 added what ran where: every step's gpu flag,
// backend, devices, case counts and failed cases; burn-in durations, duty
// cycle and telemetry verdicts. Version 1 predicates are not accepted as
// version 2.
const ValidationPredicateType = "https://gpuattest.dev/gpu-validation/v2"

// Backends of StepVerdict.Backend.
const (
	BackendCUDA = "cuda"
	BackendCPU  = "cpu"
)

// Result values of ValidationPredicate.Result.
const (
	ResultPassed = "passed"
	ResultFailed = "failed"
)

// ValidationPredicate is the GPU validation predicate: what ran, on which
// hardware, with which results. JSON field names are snake_case.
type ValidationPredicate struct {
	// Result is "passed" only when every step and preflight check passed;
	// otherwise "failed".
	Result string `json:"result"`
	// FailedSteps names the steps (and "preflight/<check>" entries) that did
	// not pass; empty when Result is "passed".
	FailedSteps []string `json:"failed_steps"`
	// RunError says why the run itself failed (interrupted, an engine
	// error), when it did; the result is then "failed".
	RunError string `json:"run_error,omitempty"`
	// Simulated is true when the hardware record comes from a simulated GPU
	// (GPUATTEST_FAKE_GPU); lifted from the record.
	Simulated bool `json:"simulated"`
	// Hardware is the run's hardware record (schemas/hardware.schema.json);
	// its digest field is the one hardware digest of the predicate.
	Hardware json.RawMessage `json:"hardware"`
	// Build holds the build facts, when the run built anything.
	Build *BuildFacts `json:"build,omitempty"`
	// Results lists every result file with its sha256.
	Results []FileDigest `json:"results"`
	// Coverage are the totals of the coverage reports the test steps
	// named (each also in Results, kind "coverage"); absent when none
	// did. Policies read them as the variable coverage.
	Coverage *CoverageFacts `json:"coverage,omitempty"`
	// Steps lists every step with its kind and verdict.
	Steps []StepVerdict `json:"steps"`
	// Benchmarks summarizes each benchmark case.
	Benchmarks []BenchmarkSummary `json:"benchmarks,omitempty"`
	// Burnin summarizes each burn-in step.
	Burnin []BurninSummary `json:"burnin,omitempty"`
	// Floors are the per-model floors the burn-in and benchmark steps
	// judged each GPU against, with what it reached, and the GPUs they
	// could not judge (no floor for the model, "no floor: not judged"):
	// what "passed" meant.
	Floors []AppliedFloor `json:"floors,omitempty"`
	// Telemetry summarizes GPU telemetry over the run.
	Telemetry *TelemetrySummary `json:"telemetry,omitempty"`
	// Preflight lists the preflight checks and their outcomes.
	Preflight []PreflightCheck `json:"preflight,omitempty"`
	// Source is the git source the run was made from, when it ran in a
	// git work tree.
	Source *Source `json:"source,omitempty"`
	// PipelineDigest is "sha256:<hex>" of the pipeline file.
	PipelineDigest string `json:"pipeline_digest"`
	// LockDigest is "sha256:<hex>" of the lock file, when there is one.
	LockDigest string `json:"lock_digest,omitempty"`
	// StartedAt is when the run started (RFC 3339, UTC).
	StartedAt time.Time `json:"started_at"`
	// FinishedAt is when the run finished (RFC 3339, UTC).
	FinishedAt time.Time `json:"finished_at"`
	// GpuattestVersion is the version of gpuattest that made the run.
	GpuattestVersion string `json:"gpuattest_version"`
	// RunID names the run (its run directory's name, the provenance's
	// invocationId): with FinishedAt, the signed identity of the run that
	// a registry's tags cannot change (gpuattest history shows and orders
	// by it). Absent from statements made before it was added.
	RunID string `json:"run_id,omitempty"`
	// GPUEvidence is what each GPU signed over the run's nonce, or why
	// it signed nothing; absent from statements made before it was
	// collected.
	GPUEvidence *GPUEvidence `json:"gpu_evidence,omitempty"`
}

// BuildFacts are the facts of the run's cuda-build steps.
type BuildFacts struct {
	// Targets are the pinned CUDA targets ("sm_80", "sm_90", ...).
	Targets []string `json:"targets"`
	// Artifacts describes each built artifact.
	Artifacts []BuildArtifact `json:"artifacts"`
	// Reproducible is true when every reproducibility check found
	// identical bytes, false when one differed, absent when none ran.
	Reproducible *bool `json:"reproducible,omitempty"`
}

// BuildArtifact is one built artifact and what cuobjdump found in it.
type BuildArtifact struct {
	// Step is the id of the step that built it.
	Step string `json:"step"`
	// Path is the artifact's path (slash-separated, relative).
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the artifact.
	SHA256 string `json:"sha256"`
	// SASSArchs are the SASS architectures it holds ("sm_90", ...).
	SASSArchs []string `json:"sass_archs"`
	// PTXArchs are the PTX architectures it holds ("compute_90", ...).
	PTXArchs []string `json:"ptx_archs"`
	// Cubins are the per-architecture cubins it holds, by digest.
	Cubins []CubinDigest `json:"cubins,omitempty"`
	// Kind is what an exec step's output is ("executable",
	// "shared-library", "object", "archive", "fatbin", "cubin", "ptx",
	// "file", "link", or "host-only" for one its step declared host-only
	// and that was not inspected); absent for a cuda-build's.
	Kind string `json:"kind,omitempty"`
	// NoDeviceCode is true for an exec step's output that holds no
	// device code (or was not inspected: Kind "host-only" or "link").
	NoDeviceCode bool `json:"no_device_code,omitempty"`
}

// CubinDigest is the digest of the cubin for one architecture.
type CubinDigest struct {
	// Arch is the SASS architecture ("sm_90").
	Arch string `json:"arch"`
	// SHA256 is the hex sha256 of the extracted cubin.
	SHA256 string `json:"sha256"`
}

// FileDigest is a file a run produced or read, by path and sha256: an
// artifact (a statement subject), a result file, a byproduct or a source.
type FileDigest struct {
	// Path is the file's path, slash-separated and relative to the run's
	// work dir (artifacts, sources, headers read) or run directory
	// (results, logs); absolute for a file of the build machine that a
	// host build read (kind "host-read"). An artifact's path becomes its
	// subject name.
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file.
	SHA256 string `json:"sha256"`
	// Step is the id of the step that produced it, when known.
	Step string `json:"step,omitempty"`
	// Kind says what the file is ("fatbin", "results", "junit", "log", ...).
	Kind string `json:"kind,omitempty"`
}

// StepVerdict is one step's kind and final state.
type StepVerdict struct {
	// ID is the step id.
	ID string `json:"id"`
	// Kind is the step kind (cuda-build, exec, test, benchmark, ...).
	Kind string `json:"kind"`
	// Verdict is the step's final state (passed, failed, error, skipped,
	// cached).
	Verdict string `json:"verdict"`
	// Reason says why a step that did not pass did not, in one line.
	Reason string `json:"reason,omitempty"`
	// Runner is the runner the step ran on: host, docker or bwrap.
	Runner string `json:"runner,omitempty"`
	// GPU is true when the pipeline marks the step gpu: true.
	GPU bool `json:"gpu"`
	// Backend is where a test, benchmark or burn-in ran its cases, as its
	// results say: cuda or cpu. Absent for other kinds, and for results
	// that do not say (JUnit).
	Backend string `json:"backend,omitempty"`
	// Devices are the GPUs of the hardware record the step ran on: the one
	// its results name (by UUID), else those CUDA_VISIBLE_DEVICES left
	// visible to a gpu: true step (all of them when unset). Empty for a
	// step that used no GPU; a simulated GPU says so.
	Devices []Device `json:"devices"`
	// Cases tallies a test's, benchmark's or burn-in's cases by status.
	Cases *CaseCounts `json:"cases,omitempty"`
	// FailedCases names the cases that failed or errored.
	FailedCases []string `json:"failed_cases,omitempty"`
}

// Device is a GPU a step ran on, as the hardware record describes it.
type Device struct {
	// UUID is the device UUID ("GPU-...").
	UUID string `json:"uuid"`
	// Name is the product name ("NVIDIA H100 80GB HBM3").
	Name string `json:"name"`
	// ComputeCapability is "major.minor" ("9.0").
	ComputeCapability string `json:"compute_capability"`
	// Simulated is true for a simulated GPU (GPUATTEST_FAKE_GPU).
	Simulated bool `json:"simulated"`
}

// CaseCounts tallies cases by status.
type CaseCounts struct {
	// Total is the number of cases.
	Total int `json:"total"`
	// Passed, Failed, Skipped and Errored count the cases by status.
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Errored int `json:"errored"`
}

// BenchmarkSummary summarizes one benchmark case.
type BenchmarkSummary struct {
	// Step is the benchmark step's id.
	Step string `json:"step"`
	// Case is the benchmark case name.
	Case string `json:"case"`
	// MedianNS is the median time per iteration in nanoseconds.
	MedianNS float64 `json:"median_ns"`
	// CILowNS and CIHighNS bound the confidence interval of the median.
	CILowNS float64 `json:"ci_low_ns"`
	// CIHighNS is the upper bound of the confidence interval of the median.
	CIHighNS float64 `json:"ci_high_ns"`
	// Samples is the number of measured samples.
	Samples int `json:"samples,omitempty"`
	// Status is the case's status (passed, failed, skipped, error), the
	// worst over seeds.
	Status string `json:"status,omitempty"`
	// Throughput is the case's throughput at the median, when it has one.
	Throughput *Throughput `json:"throughput,omitempty"`
	// RooflineAttained is the attained fraction of the roof that bounds
	// the case on its GPU model (0 to 1), when the model is in the peak
	// table and the case reports flops or bytes.
	RooflineAttained *float64 `json:"roofline_attained,omitempty"`
	// Gate is the gate's verdict (passed, failed, none).
	Gate string `json:"gate,omitempty"`
	// Comparisons are the case's verdicts against the step's same-run
	// reference and stored baseline.
	Comparisons []BenchmarkComparison `json:"comparisons,omitempty"`
}

// BenchmarkComparison is one benchmark case's verdict against a same-run
// reference or a stored baseline.
type BenchmarkComparison struct {
	// Against is "reference" (measured in the same run, interleaved) or
	// "baseline" (a stored file).
	Against string `json:"against"`
	// Method is paired-signed-rank (reference) or mann-whitney (baseline).
	Method string `json:"method,omitempty"`
	// Verdict is SAME, FASTER, SLOWER, AMBIGUOUS or MISSING.
	Verdict string `json:"verdict"`
	// Delta is the relative change (0.05: 5 % slower), with the bounds of
	// its confidence interval.
	Delta  float64 `json:"delta"`
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
	// Enforced is true when a SLOWER or MISSING verdict fails the step.
	Enforced bool `json:"enforced"`
	// Release is the manifest digest (sha256:<hex>) of the published
	// release the reference ran against, verified before it ran; empty
	// for a reference that names no release, and for a baseline.
	Release string `json:"release,omitempty"`
}

// Throughput is a throughput value with its unit.
type Throughput struct {
	// Value is the throughput in Unit.
	Value float64 `json:"value"`
	// Unit is the unit ("GB/s", "GFLOP/s", "items/s").
	Unit string `json:"unit"`
}

// BurninSummary summarizes one burn-in step.
type BurninSummary struct {
	// Step is the burn-in step's id.
	Step string `json:"step"`
	// RequestedSeconds is the duration the step asked for.
	RequestedSeconds float64 `json:"requested_seconds"`
	// DurationSeconds is how long the burn-in ran.
	DurationSeconds float64 `json:"duration_seconds"`
	// Completed is true when it ran for the whole requested duration.
	Completed bool `json:"completed"`
	// Sustained is true when the suite ran the burn-in itself, launching
	// every case back to back in one process.
	Sustained bool `json:"sustained,omitempty"`
	// Iterations is how many times the suite ran.
	Iterations int `json:"iterations"`
	// Failures is how many iterations failed.
	Failures int `json:"failures"`
	// OutputConsistent is true when every iteration produced the same output.
	OutputConsistent bool `json:"output_consistent"`
	// LeakDetected is true when memory grew across iterations.
	LeakDetected bool `json:"leak_detected"`
	// DutyCycle is a sustained run's busy share of its wall time (0 to 1);
	// MinDutyCycle the share required, absent when only reported.
	DutyCycle    *float64 `json:"duty_cycle,omitempty"`
	MinDutyCycle *float64 `json:"min_duty_cycle,omitempty"`
	// Telemetry is the telemetry verdict of a gpu: true burn-in.
	Telemetry *StepTelemetry `json:"telemetry,omitempty"`
	// Verdict is the step's verdict.
	Verdict string `json:"verdict"`
}

// Verdicts of AppliedFloor.Verdict.
const (
	FloorPassed    = "passed"
	FloorFailed    = "failed"
	FloorNotJudged = "not judged"
)

// AppliedFloor is one floor of a GPU's model that a step judged the GPU
// against (gpuattest's per-model table, pipeline/floors), or the record
// that it judged none and why.
type AppliedFloor struct {
	// Step is the step's id.
	Step string `json:"step"`
	// GPU is the GPU's UUID.
	GPU string `json:"gpu,omitempty"`
	// Model is the table's model ("H100 SXM"); empty when the table has
	// none for the GPU.
	Model string `json:"model,omitempty"`
	// Metric is what the floor bounds: power_share (the burn-in's median
	// power of the enforced limit), memory_bandwidth (the bandwidth
	// case's device-local copy) or tensor_fp16 (the tensor-core burn).
	Metric string `json:"metric"`
	// Min is the floor and Peak the model's published peak, in Unit
	// ("share of the enforced power limit", "bytes/s", "flop/s").
	Min  float64 `json:"min,omitempty"`
	Peak float64 `json:"peak,omitempty"`
	Unit string  `json:"unit,omitempty"`
	// Measured is what the GPU reached, in Unit; absent when not
	// measured.
	Measured *float64 `json:"measured,omitempty"`
	// Source names where Peak was published, SourceURL where it is.
	Source    string `json:"source,omitempty"`
	SourceURL string `json:"source_url,omitempty"`
	// Verdict is passed, failed or "not judged".
	Verdict string `json:"verdict"`
	// Note says why a floor was not judged ("no floor: not judged", a
	// simulated GPU, no readings).
	Note string `json:"note,omitempty"`
}

// TelemetrySummary summarizes GPU telemetry taken around GPU steps.
type TelemetrySummary struct {
	// MaxTemperatureC is the highest GPU temperature seen, in °C.
	MaxTemperatureC float64 `json:"max_temperature_c"`
	// MaxPowerW is the highest power draw seen, in watts.
	MaxPowerW float64 `json:"max_power_w"`
	// XidEvents is the number of Xid events seen.
	XidEvents int `json:"xid_events"`
	// ECCErrorsDelta is the increase of ECC error counters over the run.
	ECCErrorsDelta int64 `json:"ecc_errors_delta"`
	// ThrottleReasons lists the clock throttle reasons seen.
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`
}

// StepTelemetry is telemetry's verdict on one step: Xid events, ECC
// errors and the throttled fraction of its samples.
type StepTelemetry struct {
	// Verdict is passed or failed (a fatal Xid, a new double-bit ECC
	// error or a row-remap failure).
	Verdict string `json:"verdict"`
	// Reasons say why it failed, one line per cause.
	Reasons []string `json:"reasons,omitempty"`
	// XidEvents and FatalXidEvents count the Xid events seen, all and
	// fatal.
	XidEvents      int `json:"xid_events"`
	FatalXidEvents int `json:"fatal_xid_events"`
	// ECCErrorsDelta is the increase of the double-bit ECC counters.
	ECCErrorsDelta int64 `json:"ecc_errors_delta"`
	// ThrottledFraction is the share of samples with a power, thermal or
	// hardware slowdown reason (0 to 1).
	ThrottledFraction float64 `json:"throttled_fraction"`
	// Samples is the number of telemetry samples.
	Samples int `json:"samples"`
	// Simulated is true when the telemetry came from a simulated GPU.
	Simulated bool `json:"simulated"`
}

// PreflightCheck is one preflight check's outcome.
type PreflightCheck struct {
	// Step is the gpu: true step the check ran before.
	Step string `json:"step,omitempty"`
	// Check is the check's name.
	Check string `json:"check"`
	// GPU is the NVML index of the GPU the check is about; absent for
	// machine-wide checks.
	GPU *int `json:"gpu,omitempty"`
	// Status is passed, failed, warned or skipped.
	Status string `json:"status"`
	// Seen is the value found and Required the value asked for.
	Seen     string `json:"seen,omitempty"`
	Required string `json:"required,omitempty"`
	// Message explains the status.
	Message string `json:"message,omitempty"`
}

// Source is the git source of a run: the repository, the commit checked
// out and whether the work tree had uncommitted changes.
type Source struct {
	// URI is the repository's remote (git+https://host/org/repo.git), with
	// no credentials; empty when the repository has no remote.
	URI string `json:"uri,omitempty"`
	// Commit is the hex id of the commit checked out.
	Commit string `json:"commit"`
	// Dirty is true when the work tree had uncommitted changes: the
	// commit alone does not say what was built.
	Dirty bool `json:"dirty"`
}

// CoverageFacts are the coverage totals of a run: every report's lines
// (and branches, where given) summed, and each report's own.
type CoverageFacts struct {
	CoverageTotals
	// Files are the reports, in step order.
	Files []CoverageFile `json:"files"`
}

// CoverageTotals are line (statement, for Go) and branch counts and
// their ratios.
type CoverageTotals struct {
	// Lines is LinesHit / LinesFound, 0 when nothing was found.
	Lines      float64 `json:"lines"`
	LinesFound int64   `json:"lines_found"`
	LinesHit   int64   `json:"lines_hit"`
	// Branches is BranchesHit / BranchesFound; absent when no report
	// gave branches.
	Branches      *float64 `json:"branches,omitempty"`
	BranchesFound int64    `json:"branches_found,omitempty"`
	BranchesHit   int64    `json:"branches_hit,omitempty"`
}

// CoverageFile is one coverage report with its totals.
type CoverageFile struct {
	// Step is the test step that named it; Path its copy in the run
	// directory (as in Results); SHA256 the hex sha256 of its bytes.
	Step   string `json:"step"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Format is lcov, cobertura or go.
	Format string `json:"format"`
	CoverageTotals
}
