// Package report renders what a run, or a verified attestation bundle,
// says for people: one self-contained HTML page (inline CSS and SVG
// charts drawn with gonum.org/v1/plot, no script, nothing fetched), the
// same charts as PNG files, and a compact Markdown summary for pull
// requests and CI job summaries.
//
// FromRun reads a run directory through pipeline/rundir; FromVerification
// takes what attest/verify verified and refuses a bundle that did not
// verify. The renderers escape every string that comes from a pipeline,
// a results file or a predicate.
package report
