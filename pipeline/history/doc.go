// Package history draws a repository's verified benchmark history: it
// lists the release tags of a registry repository (attest/oci.Tags),
// verifies each release as verify REF does (attest/oci.Verify, with the
// caller's verifier: the same trust material and policy), leaves out and
// names every release that does not verify, and reads each benchmark
// case's median, confidence interval, throughput and attained roofline
// fraction from every verified GPU validation statement of the release
// (one per signed run: a release validated on two GPUs has two).
//
// Tags are the registry's word and decide only what is read: a manifest
// is one release however many tags name it (more than one is flagged),
// and releases are shown and ordered by the identity their signed
// statements carry (run id, finish time, signing time when verified),
// never by tag; a tag whose version order disagrees is flagged.
//
// A series is one case on one kind of hardware: its key is the step and
// case, the GPU model, the driver, whether clocks were locked and
// whether the GPU was simulated, so that points from different hardware
// never join one line. Every point names its release tag, the release
// manifest's digest, the digest of the bundle it was read from and that
// run's signed id and finish time. A
// step between consecutive releases of a series larger than the
// threshold (the gate's, 3 % unless told) is marked, naming both
// releases' digests.
//
// History writes the result as JSON, a self-contained HTML page (inline
// SVG, no script, nothing fetched), Bencher Metric Format and CSV. The
// package never prints.
package history
