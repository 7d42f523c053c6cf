// Package run runs a pipeline end to end, the way gpuattest run does, in
// one call: Pipeline wires the step executors, the container runners,
// image pinning through gpuattest.lock, the hardware record with GPU
// preflight and telemetry, the host toolchain fingerprint, and the
// verification of the published releases benchmark references name
// (reference.release, with attest/oci) into the engine, runs the DAG into a run directory and, with a signer, re-checks
// every verdict and signs the run's attestations into
// attestations.intoto.jsonl.
//
//	p, err := pipeline.Load("pipelines/release.yaml")
//	res, err := run.Pipeline(ctx, p, run.WithSigner(signer, "release.key"))
//
// A front end parses flags, builds options, makes this call and renders
// the Result. Invalid input is an error wrapping ErrInvalid (a front end's
// usage error); a pipeline that does not load is pipeline.Problems.
package run
