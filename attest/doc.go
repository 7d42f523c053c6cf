// Package attest turns a finished gpuattest run into in-toto Statement v1
// documents (https://in-toto.io/Statement/v1, DSSE payload type
// application/vnd.in-toto+json) that attest/sign signs into Sigstore bundles.
//
// Two statements are made per run, both with the released artifacts
// (fatbins, cubins) as subjects, by sha256:
//
//   - ValidationStatement: predicate type
//     https://gpuattest.dev/gpu-validation/v2 (ValidationPredicateType),
//     the GPU validation predicate (ValidationPredicate): the hardware record
//     and its digest, build facts, the sha256 of every result file, each
//     step's verdict, benchmark, burn-in, telemetry and preflight summaries,
//     pipeline and lock digests, timing and the gpuattest version. Its
//     top-level result is "passed" only when every step passed; otherwise it
//     is "failed" and failed_steps names the steps, so a run that did not
//     pass never yields a passing claim. Its JSON Schema is
//     schemas/predicate.schema.json, generated from these Go types.
//
//   - ProvenanceStatement: SLSA Provenance v1
//     (https://slsa.dev/provenance/v1) for the build steps.
//
// # Build type https://gpuattest.dev/build/v1
//
// The buildType of gpuattest's SLSA provenance is BuildType
// (https://gpuattest.dev/build/v1). Its parameters are:
//
//   - externalParameters: {"pipeline": {"path": P, "ref": R}, "steps": [...]}:
//     the pipeline file path (relative to the source root), an optional
//     source ref (e.g. a git commit), and the step ids selected for the run
//     (empty means all).
//   - internalParameters: {"runner": KIND, "gpuattest_version": V}.
//   - resolvedDependencies: the pipeline file and the lock file by sha256
//     (names "pipeline" and "lock"), every container image as
//     name + uri + sha256 manifest digest, with its index and config
//     digests and platform as annotations (uri: "oci://REPO@sha256:..." for a
//     registry image, the package URL "pkg:oci/NAME@sha256%3A<hex>" for
//     an image carried as a file, never a local path), every source file by path and
//     sha256, and the toolchain (nvcc, cuobjdump, host compiler) by name,
//     version and, when known, sha256.
//   - builder.id: BuilderHost (https://gpuattest.dev/builder/host/v1) when
//     build steps ran on the host, BuilderContainer
//     (https://gpuattest.dev/builder/container/v1) when every build step ran
//     in a digest-pinned container (docker or bwrap).
//   - runDetails.byproducts: logs and the reproducibility report by path and
//     sha256.
//
// # Digests
//
// Digests given in a Run are lowercase hex sha256 strings for files and
// "sha256:<hex>" strings for pipeline_digest, lock_digest and image
// digests. hardware_digest is "sha256:<hex>" of the hardware record bytes as
// given in Run.Hardware (the run directory's hardware.json); the record
// itself is embedded byte for byte (compacted) under "hardware".
package attest
