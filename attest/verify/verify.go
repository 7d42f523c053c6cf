package verify

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Exit codes of a verification, as Report.Code returns them.
const (
	CodeVerified  = 0
	CodeError     = 1
	CodeSignature = 10
	CodeSubject   = 11
	CodePolicy    = 12
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
)

// Option configures a Verifier.
type Option func(*options) error

type options struct {
	key           crypto.PublicKey
	keyName       string
	trustedRoot   root.TrustedMaterial
	rootName      string
	san, sanRE    string
	iss, issRE    string
	predicateType string
	policy        *policy.Policy
	logger        *slog.Logger
	now           func() time.Time
}

// WithKey verifies key-signed bundles against pub; name (a file path)
// is shown in the criteria.
func WithKey(pub crypto.PublicKey, name string) Option {
	return func(o *options) error {
		if pub == nil {
			return errors.New("public key: nil")
		}
		o.key, o.keyName = pub, name
		return nil
	}
}

// WithTrustedRoot sets the Sigstore trusted root (Fulcio CAs, Rekor logs,
// TSAs, CT logs); name is shown in the criteria.
func WithTrustedRoot(tm root.TrustedMaterial, name string) Option {
	return func(o *options) error {
		if tm == nil {
			return errors.New("trusted root: nil")
		}
		o.trustedRoot, o.rootName = tm, name
		return nil
	}
}

// WithCertificateIdentity requires keyless bundles to carry a certificate
// whose SAN equals san (or matches sanRegexp) and whose OIDC issuer equals
// issuer (or matches issuerRegexp). Both an identity and an issuer are
// required: there is no "any identity" default.
func WithCertificateIdentity(san, sanRegexp, issuer, issuerRegexp string) Option {
	return func(o *options) error {
		if san == "" && sanRegexp == "" {
			return errors.New("certificate identity: give --certificate-identity or --certificate-identity-regexp")
		}
		if issuer == "" && issuerRegexp == "" {
			return errors.New("certificate OIDC issuer: give --certificate-oidc-issuer or --certificate-oidc-issuer-regexp")
		}
		for _, re := range []string{sanRegexp, issuerRegexp} {
			if re != "" {
				if _, err := regexp.Compile(re); err != nil {
					return fmt.Errorf("regexp %q: %w", re, err)
				}
			}
		}
		o.san, o.sanRE, o.iss, o.issRE = san, sanRegexp, issuer, issuerRegexp
		return nil
	}
}

// WithPredicateType sets the predicate type to look for (default
// attest.ValidationPredicateType).
func WithPredicateType(uri string) Option {
	return func(o *options) error {
		if uri == "" {
			return errors.New("predicate type: empty")
		}
		o.predicateType = uri
		return nil
	}
}

// WithPolicy sets the policy (default policy.Default for the validation
// predicate type, no rules for other types).
func WithPolicy(p *policy.Policy) Option {
	return func(o *options) error { o.policy = p; return nil }
}

// WithLogger sets the logger for diagnostics (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		o.logger = l
		return nil
	}
}

// Verifier verifies bundles against fixed criteria.
type Verifier struct {
	opts     options
	sv       *sgverify.Verifier
	identity *sgverify.CertificateIdentity
	program  *policy.Program
	criteria []Criterion
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

// settle sets each criterion's Result from the checks made.
func (r *Report) settle() {
	for i := range r.Criteria {
		c := &r.Criteria[i]
		pass, fail := 0, 0
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

// New builds a Verifier. It needs a key (WithKey) or a trusted root and a
// certificate identity; it never reaches the network.
func New(opts ...Option) (*Verifier, error) {
	o := options{predicateType: attest.ValidationPredicateType, logger: slog.New(slog.DiscardHandler), now: time.Now}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	keyless := o.san != "" || o.sanRE != ""
	switch {
	case o.key == nil && !keyless:
		return nil, errors.New("no verification material\nhint: give --key PUB, or --trusted-root FILE with --certificate-identity and --certificate-oidc-issuer")
	case o.key != nil && keyless:
		return nil, errors.New("--key and --certificate-identity are exclusive\nhint: a bundle is either key-signed or keyless")
	case keyless && o.trustedRoot == nil:
		return nil, errors.New("keyless verification needs --trusted-root FILE\nhint: gpuattest verifies offline; get trusted_root.json from your Sigstore instance")
	}
	v := &Verifier{opts: o}
	var vopts []sgverify.VerifierOption
	var tm root.TrustedMaterial
	var crit []Criterion
	if o.key != nil {
		kv, err := keyVerifier(o.key)
		if err != nil {
			return nil, err
		}
		keyMat := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
			return root.NewExpiringKey(kv, time.Time{}, time.Time{}), nil
		})
		fp, _ := keyFingerprint(o.key)
		crit = append(crit, Criterion{Check: CheckSignature, Requirement: fmt.Sprintf("DSSE signature by the key in %s (%s)", o.keyName, fp)})
		tm = keyMat
		if o.trustedRoot != nil {
			tm = root.TrustedMaterialCollection{o.trustedRoot, keyMat}
		}
	} else {
		tm = o.trustedRoot
		id, err := sgverify.NewShortCertificateIdentity(o.iss, o.issRE, o.san, o.sanRE)
		if err != nil {
			return nil, fmt.Errorf("certificate identity: %w", err)
		}
		v.identity = &id
		crit = append(crit,
			Criterion{Check: CheckSignature, Requirement: fmt.Sprintf("DSSE signature by a certificate chaining to a Fulcio CA in %s", o.rootName)},
			Criterion{Check: CheckIdentity, Requirement: fmt.Sprintf("certificate SAN %s, OIDC issuer %s", matcher(o.san, o.sanRE), matcher(o.iss, o.issRE))})
	}
	// Transparency log and timestamps: as the trusted material requires.
	var tsReq []string
	hasTSA, hasRekor, hasCT := false, false, false
	if o.trustedRoot != nil {
		hasTSA = len(o.trustedRoot.TimestampingAuthorities()) > 0
		hasRekor = len(o.trustedRoot.RekorLogs()) > 0
		hasCT = len(o.trustedRoot.CTLogs()) > 0
	}
	if hasRekor {
		vopts = append(vopts, sgverify.WithTransparencyLog(1))
		tsReq = append(tsReq, "an entry in a transparency log of the trusted root")
	}
	switch {
	case hasTSA && hasRekor:
		vopts = append(vopts, sgverify.WithObserverTimestamps(1))
		tsReq = append(tsReq, "a signed timestamp or a log integrated time")
	case hasTSA:
		vopts = append(vopts, sgverify.WithSignedTimestamps(1))
		tsReq = append(tsReq, "an RFC 3161 timestamp from a TSA of the trusted root")
	case hasRekor:
		vopts = append(vopts, sgverify.WithIntegratedTimestamps(1))
	case o.key == nil:
		vopts = append(vopts, sgverify.WithCurrentTime())
		tsReq = append(tsReq, "certificate valid now (the trusted root has no TSA or log)")
	default:
		vopts = append(vopts, sgverify.WithNoObserverTimestamps())
		tsReq = append(tsReq, "none (key signature, no trusted root)")
	}
	if hasCT && o.key == nil {
		vopts = append(vopts, sgverify.WithSignedCertificateTimestamps(1))
		tsReq = append(tsReq, "an SCT from a CT log of the trusted root")
	}
	crit = append(crit, Criterion{Check: CheckTimestamps, Requirement: strings.Join(tsReq, "; ")})
	sv, err := sgverify.NewVerifier(tm, vopts...)
	if err != nil {
		return nil, fmt.Errorf("configuring verifier: %w", err)
	}
	v.sv = sv
	crit = append(crit, Criterion{Check: CheckPredicateType, Requirement: o.predicateType})
	pol := o.policy
	if pol == nil && o.predicateType == attest.ValidationPredicateType {
		pol = policy.Default()
	}
	if pol != nil {
		prog, err := pol.Compile()
		if err != nil {
			return nil, err
		}
		v.program = prog
		for _, r := range pol.Rules {
			req := r.Name + ": " + r.Expr
			crit = append(crit, Criterion{Check: CheckPolicy, Requirement: fmt.Sprintf("[%s] %s", pol.Source(), req), Rule: r.Name})
		}
	}
	v.criteria = crit
	return v, nil
}

func matcher(v, re string) string {
	if v != "" {
		return fmt.Sprintf("= %q", v)
	}
	return fmt.Sprintf("~ /%s/", re)
}

func keyVerifier(pub crypto.PublicKey) (signature.Verifier, error) {
	alg, err := signature.GetDefaultAlgorithmDetails(pub)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	v, err := signature.LoadVerifier(pub, alg.GetHashType())
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return v, nil
}

func keyFingerprint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Artifact is a file to check against the subjects.
type Artifact struct {
	// Name is how the artifact is shown (its path).
	Name string `json:"name"`
	// SHA256 is its lowercase hex sha256.
	SHA256 string `json:"sha256"`
}

// DigestFile hashes the file at path.
func DigestFile(path string) (Artifact, error) {
	sum, _, err := digest.File(path)
	if err != nil {
		return Artifact{}, fmt.Errorf("reading artifact: %w", err)
	}
	return Artifact{Name: path, SHA256: sum}, nil
}

// Criteria returns what the Verifier enforces, plus one subject criterion
// per artifact.
func (v *Verifier) Criteria(artifacts []Artifact) []Criterion {
	var out []Criterion
	for _, c := range v.criteria {
		if c.Check == CheckPolicy {
			break
		}
		out = append(out, c)
	}
	for _, a := range artifacts {
		out = append(out, Criterion{Check: CheckSubject, Requirement: fmt.Sprintf("%s (sha256:%s) is a subject of a verified bundle", a.Name, a.SHA256), Artifact: a.Name})
	}
	return append(out, v.criteria[len(out)-len(artifacts):]...)
}

// Entry is one bundle to verify, with where it came from.
type Entry struct {
	// Source is "file:line" or "file".
	Source string
	// Data is the bundle's JSON.
	Data []byte
}

// ParseBundles splits a file's content into bundles: one JSON document
// (a single bundle, possibly indented) or JSON Lines (one per line).
func ParseBundles(name string, data []byte) ([]Entry, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s: no bundles: the file is empty", name)
	}
	if json.Valid(trimmed) {
		return []Entry{{Source: name, Data: trimmed}}, nil
	}
	var out []Entry
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			return nil, fmt.Errorf("%s:%d: not a JSON document\nhint: expected a Sigstore bundle or JSON Lines of bundles", name, i+1)
		}
		out = append(out, Entry{Source: fmt.Sprintf("%s:%d", name, i+1), Data: line})
	}
	return out, nil
}

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
	// Verified is true when signature, identity and timestamps held.
	Verified bool `json:"verified"`
	// Signer describes the key or certificate that signed it.
	Signer string `json:"signer,omitempty"`
	// PredicateType is the statement's predicate type (verified bundles).
	PredicateType string `json:"predicate_type,omitempty"`
	// Subjects are the statement's subjects (verified bundles).
	Subjects []attest.Subject `json:"subjects,omitempty"`
	// Result is the validation predicate's top-level result, if any.
	Result string `json:"result,omitempty"`

	statement *attest.Statement
}

// Report is the outcome of Verify, VSA-like.
type Report struct {
	// Verified is true when every check passed.
	Verified bool `json:"verified"`
	// VerificationResult is "PASSED" or "FAILED" (as in a SLSA VSA).
	VerificationResult string `json:"verificationResult"`
	// Code is the exit code: 0, 10, 11, 12 or 1.
	Code int `json:"exit_code"`
	// PredicateType is the predicate type verified.
	PredicateType string `json:"predicateType"`
	// Policy names the policy applied ("default", a file, or "").
	Policy string `json:"policy,omitempty"`
	// Criteria are what was enforced.
	Criteria []Criterion `json:"criteria"`
	// Checks are every check with its outcome, in order.
	Checks []Check `json:"checks"`
	// Bundles are the bundles read.
	Bundles []BundleResult `json:"bundles"`
	// Artifacts are the artifacts checked.
	Artifacts []Artifact `json:"artifacts"`
	// VerifiedAt is when the verification ran.
	VerifiedAt time.Time `json:"verifiedAt"`
}

func (r *Report) add(c Check) { r.Checks = append(r.Checks, c) }

// fail lowers r to code unless a more fundamental failure is recorded.
func (r *Report) fail(code int) {
	if r.Code == CodeVerified || code < r.Code && code != CodeVerified {
		r.Code = code
	}
}

// Verify checks entries and artifacts against the Verifier's criteria.
// Every bundle must verify; every artifact must be a subject of a verified
// bundle of the predicate type; the policy is evaluated over each such
// bundle that covers a given artifact (or every such bundle when no
// artifact is given).
func (v *Verifier) Verify(ctx context.Context, entries []Entry, artifacts []Artifact) *Report {
	r := &Report{
		PredicateType: v.opts.predicateType,
		Criteria:      v.Criteria(artifacts),
		Artifacts:     artifacts,
		Checks:        []Check{},
		Bundles:       []BundleResult{},
		VerifiedAt:    v.opts.now().UTC(),
	}
	if v.program != nil {
		r.Policy = v.program.Policy().Source()
	}
	if artifacts == nil {
		r.Artifacts = []Artifact{}
	}
	if len(entries) == 0 {
		r.add(Check{Check: CheckSignature, Target: "bundles", Detail: "no bundles given"})
		r.fail(CodeError)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			r.add(Check{Check: CheckSignature, Target: e.Source, Detail: err.Error()})
			r.fail(CodeError)
			break
		}
		br := v.verifyBundle(r, e)
		v.opts.logger.DebugContext(ctx, "bundle checked", "source", e.Source, "verified", br.Verified, "predicate_type", br.PredicateType)
		r.Bundles = append(r.Bundles, br)
	}
	// Bundles of the predicate type.
	var typed []*BundleResult
	for i := range r.Bundles {
		b := &r.Bundles[i]
		if b.Verified && b.PredicateType == v.opts.predicateType {
			typed = append(typed, b)
		}
	}
	if len(entries) > 0 {
		c := Check{Check: CheckPredicateType, Target: "bundles", Passed: len(typed) > 0}
		if c.Passed {
			c.Detail = fmt.Sprintf("%d of %d bundle(s) have predicate type %s", len(typed), len(r.Bundles), v.opts.predicateType)
		} else {
			c.Detail = fmt.Sprintf("no verified bundle has predicate type %s", v.opts.predicateType)
			r.fail(CodePolicy)
		}
		r.add(c)
	}
	// Subjects.
	covering := map[*BundleResult]bool{}
	for _, a := range artifacts {
		c := Check{Check: CheckSubject, Target: a.Name}
		var names []string
		for _, b := range typed {
			for _, s := range b.Subjects {
				if strings.EqualFold(s.Digest["sha256"], a.SHA256) {
					covering[b] = true
					names = append(names, fmt.Sprintf("%s in %s", s.Name, b.Source))
				}
			}
		}
		if len(names) > 0 {
			c.Passed = true
			c.Detail = "sha256:" + a.SHA256 + " is subject " + strings.Join(names, ", ")
		} else {
			c.Detail = "sha256:" + a.SHA256 + " is not a subject of any verified " + v.opts.predicateType + " bundle"
			if len(typed) > 0 {
				// Without any bundle of the type the predicate type
				// check already failed; that is the cause to report.
				r.fail(CodeSubject)
			}
		}
		r.add(c)
	}
	// Policy.
	if v.program != nil {
		for _, b := range typed {
			if len(artifacts) > 0 && !covering[b] {
				continue
			}
			subj, err := json.Marshal(b.statement.Subject)
			if err != nil {
				r.add(Check{Check: CheckPolicy, Target: b.Source, Detail: err.Error()})
				r.fail(CodeError)
				continue
			}
			results, err := v.program.Evaluate(ctx, policy.Input{
				PredicateType: b.statement.PredicateType,
				Predicate:     b.statement.Predicate,
				Subjects:      subj,
			})
			if err != nil {
				r.add(Check{Check: CheckPolicy, Target: b.Source, Detail: err.Error()})
				r.fail(CodePolicy)
				continue
			}
			for _, res := range results {
				c := Check{Check: CheckPolicy, Target: b.Source + ": " + res.Name, Passed: res.Passed}
				switch {
				case res.Error != "":
					c.Detail = "error: " + res.Error
				case !res.Passed && res.Message != "":
					c.Detail = res.Message
				case res.Passed:
					c.Detail = "holds"
				default:
					c.Detail = "does not hold: " + res.Expr
				}
				if !res.Passed {
					r.fail(CodePolicy)
				}
				r.add(c)
			}
		}
	}
	r.settle()
	r.Verified = r.Code == CodeVerified
	r.VerificationResult = "FAILED"
	if r.Verified {
		r.VerificationResult = "PASSED"
	}
	return r
}

// verifyBundle runs the cryptographic checks of one bundle.
func (v *Verifier) verifyBundle(r *Report, e Entry) BundleResult {
	br := BundleResult{Source: e.Source}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(e.Data); err != nil {
		r.add(Check{Check: CheckSignature, Target: e.Source, Detail: "not a valid Sigstore bundle: " + err.Error()})
		r.fail(CodeSignature)
		return br
	}
	if b.Bundle != nil && b.GetMessageSignature() != nil {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: "bundle holds a plain message signature (cosign sign-blob), not an in-toto attestation; hint: sign a statement (gpuattest sign, cosign attest-blob)"})
		r.fail(CodePolicy)
		return br
	}
	var pol sgverify.PolicyBuilder
	if v.identity != nil {
		pol = sgverify.NewPolicy(sgverify.WithoutArtifactUnsafe(), sgverify.WithCertificateIdentity(*v.identity))
	} else {
		pol = sgverify.NewPolicy(sgverify.WithoutArtifactUnsafe(), sgverify.WithKey())
	}
	res, err := v.sv.Verify(&b, pol)
	if err != nil {
		msg := err.Error()
		check := CheckSignature
		switch {
		case strings.Contains(msg, "certificate identit"):
			check = CheckIdentity
		case strings.Contains(msg, "log inclusion"), strings.Contains(msg, "timestamp"):
			check = CheckTimestamps
		}
		r.add(Check{Check: check, Target: e.Source, Detail: msg})
		r.fail(CodeSignature)
		return br
	}
	switch {
	case res.Signature != nil && res.Signature.Certificate != nil:
		br.Signer = fmt.Sprintf("certificate for %s (issuer %s)", res.Signature.Certificate.SubjectAlternativeName, res.Signature.Certificate.Issuer)
	default:
		fp, _ := keyFingerprint(v.opts.key)
		br.Signer = "key " + fp
	}
	r.add(Check{Check: CheckSignature, Target: e.Source, Passed: true, Detail: "signed by " + br.Signer})
	if v.identity != nil {
		r.add(Check{Check: CheckIdentity, Target: e.Source, Passed: true, Detail: br.Signer})
	}
	if n := len(res.VerifiedTimestamps); n > 0 {
		var parts []string
		for _, ts := range res.VerifiedTimestamps {
			parts = append(parts, fmt.Sprintf("%s %s", ts.Type, ts.Timestamp.UTC().Format(time.RFC3339)))
		}
		r.add(Check{Check: CheckTimestamps, Target: e.Source, Passed: true, Detail: strings.Join(parts, ", ")})
	}
	env, err := b.Envelope()
	if err != nil {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: "bundle has no DSSE envelope: " + err.Error()})
		r.fail(CodePolicy)
		return br
	}
	raw := env.RawEnvelope()
	if raw.PayloadType != attest.PayloadType {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: fmt.Sprintf("payload type %q: expected %q", raw.PayloadType, attest.PayloadType)})
		r.fail(CodePolicy)
		return br
	}
	payload, err := raw.DecodeB64Payload()
	if err == nil {
		br.statement, err = attest.ParseStatement(payload)
	}
	if err != nil {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: err.Error()})
		r.fail(CodePolicy)
		return br
	}
	br.Verified = true
	br.PredicateType = br.statement.PredicateType
	br.Subjects = br.statement.Subject
	if br.PredicateType == attest.ValidationPredicateType {
		var p struct {
			Result string `json:"result"`
		}
		if json.Unmarshal(br.statement.Predicate, &p) == nil {
			br.Result = p.Result
		}
	}
	return br
}
