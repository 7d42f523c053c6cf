// Package history draws a repository's verified benchmark history: it
// lists the release tags of a registry repository (attest/oci.Tags),
// verifies each release as verify REF does (attest/oci.Verify, with the
// caller's verifier: the same trust material and policy), leaves out and
// names every release that does not verify, and reads each benchmark
// case's median, confidence interval, throughput and attained roofline
// fraction from the verified GPU validation statement.
//
// A series is one case on one kind of hardware: its key is the step and
// case, the GPU model, the driver, whether clocks were locked and
// whether the GPU was simulated, so that points from different hardware
// never join one line. Every point names its release tag, the release
// manifest's digest and the digest of the bundle it was read from. A
// step between consecutive releases of a series larger than the
// threshold (the gate's, 3 % unless told) is marked, naming both
// releases' digests.
//
// History writes the result as JSON, a self-contained HTML page (inline
// SVG, no script, nothing fetched), Bencher Metric Format and CSV. The
// package never prints.
package history
