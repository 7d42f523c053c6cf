// Package runlayout names the files of a run directory, the one place that
// says where each lives: the engine writes through these names, the
// step kinds write their files under the step directory they are given,
// and pipeline/rundir, attestation, baselines and reports read through
// them. It imports nothing of gpuattest, so every floor of pipeline/ may
// use it.
//
//	run.json                    the engine's record (RecordFile)
//	hardware.json               the hardware record (HardwareFile)
//	attestations.intoto.jsonl   the signed attestations (AttestationsFile)
//	steps/<id>/                 a step's directory (StepDir):
//	    stdout.log stderr.log   its output (StdoutLog, StderrLog)
//	    outputs/                copies of its outputs (OutputsDir)
//	    benchmark.json          a benchmark's samples (BenchmarkFile)
//	    telemetry.jsonl         a gpu: true step's telemetry (TelemetryFile)
//	    repro.json              a cuda-build's reproducibility check (ReproFile)
package runlayout

import (
	"path"
	"path/filepath"
)

// The files and directories of a run directory.
const (
	RecordFile       = "run.json"
	HardwareFile     = "hardware.json"
	AttestationsFile = "attestations.intoto.jsonl"
	StepsDir         = "steps"
	StdoutLog        = "stdout.log"
	StderrLog        = "stderr.log"
	OutputsDir       = "outputs"
	BenchmarkFile    = "benchmark.json"
	TelemetryFile    = "telemetry.jsonl"
	ReproFile        = "repro.json"
)

// Record is the path of run.json in the run directory dir.
func Record(dir string) string { return filepath.Join(dir, RecordFile) }

// Hardware is the path of hardware.json in the run directory dir.
func Hardware(dir string) string { return filepath.Join(dir, HardwareFile) }

// Attestations is the path of the signed attestations in the run
// directory dir.
func Attestations(dir string) string { return filepath.Join(dir, AttestationsFile) }

// Steps is the directory of the steps' directories in the run directory
// dir.
func Steps(dir string) string { return filepath.Join(dir, StepsDir) }

// StepDir is the directory of step id in the run directory dir.
func StepDir(dir, id string) string { return filepath.Join(dir, StepsDir, id) }

// StepFile is the path of name (slash-separated) in step id's directory
// in the run directory dir.
func StepFile(dir, id, name string) string {
	return filepath.Join(dir, StepsDir, id, filepath.FromSlash(name))
}

// StepRel is the slash-separated path of name in step id's directory,
// relative to the run directory, as attestations list it.
func StepRel(id, name string) string { return path.Join(StepsDir, id, name) }

// Output is the path of the copy of output rel (slash-separated, relative
// to the step's work dir) in step directory stepDir.
func Output(stepDir, rel string) string {
	return filepath.Join(stepDir, OutputsDir, filepath.FromSlash(rel))
}

// InStepsDir reports whether stepDir is a step directory of a run
// directory (its parent is named StepsDir).
func InStepsDir(stepDir string) bool {
	return stepDir != "" && filepath.Base(filepath.Dir(stepDir)) == StepsDir
}
