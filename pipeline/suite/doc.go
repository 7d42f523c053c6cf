// Package suite runs and judges the validation half of a pipeline: the
// results format shared with the kernel harness (ReadResults accepts it or
// JUnit XML), the executors of the test, benchmark, burnin and profile step
// kinds, benchmark summaries with roofline figures, and the baseline
// regression gate (Compare, Baseline) built on package stats. A
// benchmark's reference may run against a published release, which a
// ReleaseFetcher verifies and writes before anything runs.
//
// Executors never print: they write their reports into the step directory
// and return a step.Outcome whose Details hold a typed, JSON-tagged struct
// (TestDetails, BenchmarkDetails, BurninDetails, ProfileDetails) that the
// run record and the attestation reuse.
package suite
