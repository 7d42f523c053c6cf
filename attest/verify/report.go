package verify

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/policy"
)

// Check names, as they appear in reports.
const (
	CheckSignature     = "signature"
	CheckIdentity      = "identity"
	CheckTimestamps    = "tlog/timestamps"
	CheckStatement     = "statement"
	CheckPredicateType = "predicate type"
	CheckSubject       = "subject"
	CheckPolicy        = "policy"
	CheckCoverage      = "coverage"
	CheckSimulated     = "SIMULATED"
)

// SimulatedAccepted is the criterion (and report warning) of a
// verification that accepts simulated hardware (WithSimulatedAllowed).
const SimulatedAccepted = "SIMULATED HARDWARE ACCEPTED (--allow-simulated): simulated GPUs pass the policy and count for coverage; " +
	"this verification says nothing about real hardware"

// Failure is the kind of failure a Report records. A Report keeps the most
// fundamental one it met, in the order of the constants: an error before
// a signature failure, a signature failure before a subject mismatch, a
// subject mismatch before a policy failure. Callers map it to what they
// need (the CLI maps it to its exit codes).
type Failure int

// Failures, most fundamental first after FailureNone.
const (
	// FailureNone means every check passed.
	FailureNone Failure = iota
	// FailureError means the verification could not be carried out: no
	// bundle, an input over a limit, a rule over its cost limit, or a
	// cancelled context.
	FailureError
	// FailureSignature is a signature, certificate identity, transparency
	// log or timestamp failure, or a bundle that is not a Sigstore bundle.
	FailureSignature
	// FailureSubject is an artifact that is not a subject of a verified
	// bundle of the predicate type.
	FailureSubject
	// FailurePolicy is a failed policy rule, a missing predicate type, or
	// a signed statement that is not a valid in-toto statement.
	FailurePolicy
)

var failureNames = [...]string{"none", "error", "signature", "subject", "policy"}

// String returns the failure's name: none, error, signature, subject or
// policy.
func (f Failure) String() string {
	if f >= 0 && int(f) < len(failureNames) {
		return failureNames[f]
	}
	return fmt.Sprintf("Failure(%d)", int(f))
}

// MarshalText encodes f as its name.
func (f Failure) MarshalText() ([]byte, error) {
	if f < 0 || int(f) >= len(failureNames) {
		return nil, fmt.Errorf("failure %d: unknown", int(f))
	}
	return []byte(f.String()), nil
}

// UnmarshalText decodes a failure name.
func (f *Failure) UnmarshalText(b []byte) error {
	for i, n := range failureNames {
		if n == string(b) {
			*f = Failure(i)
			return nil
		}
	}
	return fmt.Errorf("failure %q: expected one of %s", b, strings.Join(failureNames[:], ", "))
}

// Criterion is one thing a Verifier enforces, stated before checking.
type Criterion struct {
	// Check is the check's name (signature, identity, ...).
	Check string `json:"check"`
	// Requirement says what must hold.
	Requirement string `json:"requirement"`
	// Artifact is the artifact a subject criterion is about.
	Artifact string `json:"artifact,omitempty"`
	// Rule is the policy rule a policy criterion is about.
	Rule string `json:"rule,omitempty"`
	// Result is "passed", "failed" or "not checked" in a Report; empty
	// from Criteria.
	Result string `json:"result,omitempty"`
}

// Criterion results.
const (
	ResultPassed     = "passed"
	ResultFailed     = "failed"
	ResultNotChecked = "not checked"
)

// Check is one checked criterion.
type Check struct {
	// Check is the check's name.
	Check string `json:"check"`
	// Target is the bundle or artifact the check is about.
	Target string `json:"target"`
	// Passed is the outcome.
	Passed bool `json:"passed"`
	// Detail says what was found.
	Detail string `json:"detail,omitempty"`
}

// BundleResult is what was learnt from one bundle.
type BundleResult struct {
	// Source is where the bundle came from.
	Source string `json:"source"`
	// Digest is "sha256:<hex>" of the bundle's bytes.
	Digest string `json:"digest,omitempty"`
	// Verified is true when signature, identity and timestamps held and
	// the statement is valid.
	Verified bool `json:"verified"`
	// Signer describes the key or certificate that signed it.
	Signer string `json:"signer,omitempty"`
	// PredicateType is the statement's predicate type (verified bundles).
	PredicateType string `json:"predicate_type,omitempty"`
	// Subjects are the statement's subjects (verified bundles).
	Subjects []attest.Subject `json:"subjects,omitempty"`
	// Result is the validation predicate's top-level result, if any.
	Result string `json:"result,omitempty"`
	// SignedAt is the earliest verified timestamp of the signature (a
	// transparency log's integrated time or an RFC 3161 timestamp), when
	// the bundle has one: a key-signed bundle made offline has none.
	SignedAt *time.Time `json:"signed_at,omitempty"`
	// Judged is true when the verification's criteria were applied to
	// this bundle: it is a verified bundle of the predicate type and, when
	// artifacts were given, it names one of them as a subject (the policy,
	// when there is one, was evaluated over it). Only judged bundles'
	// subjects enter a VSA.
	Judged bool `json:"judged,omitempty"`
	// GPUEvidence is the verdict on the GPUs' signed evidence of a
	// judged validation statement; nil when it carries none (and none is
	// required).
	GPUEvidence *GPUEvidenceResult `json:"gpu_evidence,omitempty"`

	statement *attest.Statement
	// leftOut is set for a bundle left out unverified (WithLeftOut).
	leftOut bool
	// Read from the predicate by readPredicates.
	simulated   bool
	coverage    *policy.CoverageFacts
	coverageErr error
}

// Report is the outcome of Verify, VSA-like.
type Report struct {
	// Verified is true when every check passed.
	Verified bool `json:"verified"`
	// VerificationResult is "PASSED" or "FAILED" (as in a SLSA VSA).
	VerificationResult string `json:"verificationResult"`
	// Failure is the most fundamental failure met, FailureNone when
	// verified.
	Failure Failure `json:"failure"`
	// PredicateType is the predicate type verified.
	PredicateType string `json:"predicateType"`
	// Policy names the policy applied ("default", "builtin:NAME", a file,
	// or "").
	Policy string `json:"policy,omitempty"`
	// SimulatedAccepted is true when simulated hardware was accepted
	// (WithSimulatedAllowed): the verdict says nothing about real GPUs.
	SimulatedAccepted bool `json:"simulatedAccepted,omitempty"`
	// Coverage is whether each pinned target is covered by a passing GPU
	// run, when the policy asks (policy.Coverage), per group of bundles:
	// all of them without artifacts, else those with each artifact.
	Coverage []CoverageResult `json:"coverage,omitempty"`
	// Criteria are what was enforced.
	Criteria []Criterion `json:"criteria"`
	// Checks are every check with its outcome, in order.
	Checks []Check `json:"checks"`
	// Bundles are the bundles read.
	Bundles []BundleResult `json:"bundles"`
	// Artifacts are the artifacts checked; empty when none was given, in
	// which case no subject was compared with any file.
	Artifacts []Artifact `json:"artifacts"`
	// VerifiedAt is when the verification ran.
	VerifiedAt time.Time `json:"verifiedAt"`
}

func (r *Report) add(c Check) { r.Checks = append(r.Checks, c) }

// fail records f unless a more fundamental failure is recorded.
func (r *Report) fail(f Failure) {
	if f != FailureNone && (r.Failure == FailureNone || f < r.Failure) {
		r.Failure = f
	}
}

// finish settles the criteria and the verdict.
func (r *Report) finish() {
	r.settle()
	r.Verified = r.Failure == FailureNone
	r.VerificationResult = "FAILED"
	if r.Verified {
		r.VerificationResult = "PASSED"
	}
}

// settle sets each criterion's Result from the checks made.
func (r *Report) settle() {
	for i := range r.Criteria {
		c := &r.Criteria[i]
		pass, fail := r.tally(c)
		switch {
		case fail > 0:
			c.Result = ResultFailed
		case pass > 0:
			c.Result = ResultPassed
		case c.Check == CheckTimestamps && r.signaturesPassed():
			// Nothing to check beyond the signature (key, no trusted root).
			c.Result = ResultPassed
		default:
			c.Result = ResultNotChecked
		}
	}
}

// tally counts the passed and failed checks that bear on c.
func (r *Report) tally(c *Criterion) (pass, fail int) {
	for _, ch := range r.Checks {
		match := ch.Check == c.Check
		switch {
		case c.Artifact != "":
			match = match && ch.Target == c.Artifact
		case c.Rule != "":
			match = match && strings.HasSuffix(ch.Target, ": "+c.Rule)
		case c.Check == CheckSignature:
			// Undecodable statements fail the signed content.
			match = match || ch.Check == CheckStatement
		}
		if !match {
			continue
		}
		if ch.Passed {
			pass++
		} else {
			fail++
		}
	}
	return pass, fail
}

func (r *Report) signaturesPassed() bool {
	n := 0
	for _, ch := range r.Checks {
		if ch.Check == CheckSignature {
			if !ch.Passed {
				return false
			}
			n++
		}
	}
	return n > 0
}

// Statement returns the bundle's signed statement when the bundle
// verified, nil otherwise.
func (b *BundleResult) Statement() *attest.Statement {
	if !b.Verified {
		return nil
	}
	return b.statement
}
