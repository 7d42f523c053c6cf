// Package engine runs a pipeline: it schedules the step DAG with bounded
// parallelism, runs each step through its kind's executor and runner,
// writes the run directory (run.json, steps/<id>/ logs and outputs)
// atomically as it goes, caches build steps by content, and resumes an
// interrupted run.
//
// The run directory (its names are pipeline/runlayout's, which the
// engine writes through and every reader reads through):
//
//	run.json              the Record: per-step state, times, exit codes, digests
//	hardware.json         the hardware record, when one was collected
//	steps/<id>/stdout.log
//	steps/<id>/stderr.log
//	steps/<id>/outputs/   copies of the step's outputs
//
// Every path a step names stays inside the pipeline's root, and the
// engine enforces it on resolved paths as the step runs: a workdir that
// leaves the root (by .. or a symlink) does not run; inputs and outputs
// are read through an os.Root of the step's work dir, an output or input
// symlink that points out of it fails the step (one inside is recorded as
// a link, never followed), and the cache restores only through that root.
// Steps never see signing secrets (pipeline.SigningSecret); docker and
// bwrap steps get only their env, the pipeline's env and passEnv.
package engine
