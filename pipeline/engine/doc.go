// Package engine runs a pipeline: it schedules the step DAG with bounded
// parallelism, runs each step through its kind's executor and runner,
// writes the run directory (run.json, steps/<id>/ logs and outputs)
// atomically as it goes, caches build steps by content, and resumes an
// interrupted run.
//
// The run directory:
//
//	run.json              the Record: per-step state, times, exit codes, digests
//	hardware.json         the hardware record, when one was collected
//	steps/<id>/stdout.log
//	steps/<id>/stderr.log
//	steps/<id>/outputs/   copies of the step's outputs
package engine
