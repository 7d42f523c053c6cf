// Package runtypes holds the data types of a run that a front end
// renders: what a run reports while it runs (Event, Progress), the states
// it and its steps end in (State), the lines of a step's
// telemetry.jsonl (TelemetryLine), and what cuobjdump found in a built
// file (Inspection). It is go-containerregistry's pkg/v1
// for gpuattest: types only, no I/O, and it imports no package of
// pipeline/ but other types packages, so the engine, the step kinds, the
// run directory reader, the reports and the CLI name the same types
// without importing one another (the facade pipeline/run sits on top, as
// crane does).
package runtypes
