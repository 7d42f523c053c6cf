// Package verify checks Sigstore bundles of in-toto statements offline:
// signature (a public key, or a Fulcio certificate chaining to a trusted
// root with the required certificate identity), transparency log entries
// and timestamps as the trusted material requires, that every given
// artifact's sha256 is a subject of a bundle of the wanted predicate type,
// the predicate type itself, and a policy (attest/policy) over the
// predicate.
//
// A Verifier is built once (New) and states its criteria (Criteria) before
// checking any bundle (Verify). Verify never fetches anything over the
// network: keyless verification needs a trusted root file. The report
// lists every check with its outcome and the most fundamental Failure met:
// FailureError (the verification could not be carried out), then
// FailureSignature, FailureSubject and FailurePolicy. The package decides
// no process exit codes; the CLI maps failures to them.
//
// The files hold one job each: options.go (Option), verifier.go (New,
// Criteria), entries.go (bundles and artifacts in), crypto.go (signature
// and statement of one bundle), verify.go (Verify's checks), report.go
// (Report, Failure).
package verify
