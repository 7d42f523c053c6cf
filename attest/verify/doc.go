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
// lists every check with its outcome and an exit Code: 0 verified,
// 10 signature or identity, 11 subject mismatch, 12 policy failed
// (predicate type included), 1 error.
package verify
