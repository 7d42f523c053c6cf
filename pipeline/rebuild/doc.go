// Package rebuild is a third party's independent check of a signed
// build: from a verified SLSA provenance statement and a source
// directory, [Run] checks that the directory is a clean checkout of the
// recorded commit (else [ErrSourceMismatch], before anything is built),
// that a host toolchain has the recorded digests ([ErrToolchainMismatch]),
// copies the tracked files into a fresh directory, runs the recorded
// cuda-build steps and the exec steps that released outputs (and the
// exec steps they need) there in the
// pipeline's pinned images, without any cache, and compares every
// subject's digest ([Report]). When a subject differs it explains the
// difference as a reproducibility check does (ELF sections and embedded
// strings): against the original file when the caller has one
// ([WithOriginals]), else against a second rebuild.
//
// [VSA] turns a rebuild into a SLSA Verification Summary Attestation
// statement for signing (verify.VSA does the same for a verification).
package rebuild
