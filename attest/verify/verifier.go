package verify

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
)

// Verifier verifies bundles against fixed criteria.
type Verifier struct {
	opts     options
	sv       *sgverify.Verifier
	identity *sgverify.CertificateIdentity
	program  *policy.Program
	criteria []Criterion
}

// New builds a Verifier. It needs a key (WithKey) or a trusted root and a
// certificate identity; it never reaches the network.
func New(opts ...Option) (*Verifier, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if err := o.checkMaterial(); err != nil {
		return nil, err
	}
	v := &Verifier{opts: o}
	tm, crit, err := v.signerCriteria()
	if err != nil {
		return nil, err
	}
	vopts, tsReq := o.timestampPolicy()
	crit = append(crit, Criterion{Check: CheckTimestamps, Requirement: strings.Join(tsReq, "; ")})
	// sigstore-go only summarizes the statement; attest.ParseStatement,
	// the parser sign uses too, decides whether it is valid (a statement
	// check, not a signature one) and the predicate is decoded once.
	vopts = append(vopts, sgverify.WithoutStatementPredicate())
	if v.sv, err = sgverify.NewVerifier(tm, vopts...); err != nil {
		return nil, fmt.Errorf("configuring verifier: %w", err)
	}
	crit = append(crit, Criterion{Check: CheckPredicateType, Requirement: o.predicateType})
	if o.gpuEvidenceSet {
		req := "each GPU's evidence in a validation statement is signed by its device over the nonce recomputed from the run, judged as of when it was collected; unattested GPUs are shown"
		if o.requireGPUEvidence {
			req = "every GPU of a validation statement signed its evidence with its device key over the nonce recomputed from the run (--require-gpu-evidence)"
		}
		crit = append(crit, Criterion{Check: CheckGPUEvidence, Requirement: req})
	}
	pcrit, err := v.compilePolicy()
	if err != nil {
		return nil, err
	}
	v.criteria = append(crit, pcrit...)
	return v, nil
}

// checkMaterial says what is missing or contradictory in the
// verification material.
func (o *options) checkMaterial() error {
	keyless := o.san != "" || o.sanRE != ""
	switch {
	case o.key == nil && !keyless:
		return errors.New("no verification material\nhint: give --key PUB, or --trusted-root FILE with --certificate-identity and --certificate-oidc-issuer")
	case o.key != nil && keyless:
		return errors.New("--key and --certificate-identity are exclusive\nhint: a bundle is either key-signed or keyless")
	case keyless && o.trustedRoot == nil:
		return errors.New("keyless verification needs --trusted-root FILE\nhint: gpuattest verifies offline; get trusted_root.json from your Sigstore instance")
	}
	return nil
}

// signerCriteria returns the trusted material and the signature (and
// identity) criteria.
func (v *Verifier) signerCriteria() (root.TrustedMaterial, []Criterion, error) {
	o := &v.opts
	if o.key == nil {
		id, err := sgverify.NewShortCertificateIdentity(o.iss, o.issRE, o.san, o.sanRE)
		if err != nil {
			return nil, nil, fmt.Errorf("certificate identity: %w", err)
		}
		v.identity = &id
		return o.trustedRoot, []Criterion{
			{Check: CheckSignature, Requirement: fmt.Sprintf("DSSE signature by a certificate chaining to a Fulcio CA in %s", o.rootName)},
			{Check: CheckIdentity, Requirement: fmt.Sprintf("certificate SAN %s, OIDC issuer %s", matcher(o.san, o.sanRE), matcher(o.iss, o.issRE))},
		}, nil
	}
	kv, err := keyVerifier(o.key)
	if err != nil {
		return nil, nil, err
	}
	// The bundle's key hint is advisory: every hint resolves to the key
	// given, so the signature is always checked against it.
	keyMat := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(kv, time.Time{}, time.Time{}), nil
	})
	fp, _ := keyFingerprint(o.key)
	crit := []Criterion{{Check: CheckSignature, Requirement: fmt.Sprintf("DSSE signature by the key in %s (%s)", o.keyName, fp)}}
	if o.trustedRoot != nil {
		return root.TrustedMaterialCollection{o.trustedRoot, keyMat}, crit, nil
	}
	return keyMat, crit, nil
}

// timestampPolicy returns the transparency log and timestamp options the
// trusted material calls for, and their requirements in words.
func (o *options) timestampPolicy() ([]sgverify.VerifierOption, []string) {
	var vopts []sgverify.VerifierOption
	var req []string
	hasTSA, hasRekor, hasCT := false, false, false
	if o.trustedRoot != nil {
		hasTSA = len(o.trustedRoot.TimestampingAuthorities()) > 0
		hasRekor = len(o.trustedRoot.RekorLogs()) > 0
		hasCT = len(o.trustedRoot.CTLogs()) > 0
	}
	if hasRekor {
		vopts = append(vopts, sgverify.WithTransparencyLog(1))
		req = append(req, "an entry in a transparency log of the trusted root")
	}
	switch {
	case hasTSA && hasRekor:
		vopts = append(vopts, sgverify.WithObserverTimestamps(1))
		req = append(req, "a signed timestamp or a log integrated time")
	case hasTSA:
		vopts = append(vopts, sgverify.WithSignedTimestamps(1))
		req = append(req, "an RFC 3161 timestamp from a TSA of the trusted root")
	case hasRekor:
		vopts = append(vopts, sgverify.WithIntegratedTimestamps(1))
	case o.key == nil:
		vopts = append(vopts, sgverify.WithCurrentTime())
		req = append(req, "certificate valid now (the trusted root has no TSA or log)")
	default:
		vopts = append(vopts, sgverify.WithNoObserverTimestamps())
		req = append(req, "none (key signature, no trusted root)")
	}
	if hasCT && o.key == nil {
		vopts = append(vopts, sgverify.WithSignedCertificateTimestamps(1))
		req = append(req, "an SCT from a CT log of the trusted root")
	}
	return vopts, req
}

// compilePolicy compiles the policy (the default one for the validation
// predicate type) and returns one criterion per rule.
func (v *Verifier) compilePolicy() ([]Criterion, error) {
	pol := v.opts.policy
	if pol == nil && v.opts.predicateType == attest.ValidationPredicateType {
		var err error
		if pol, err = policy.Builtin(policy.BuiltinDefault, v.opts.allowSimulated); err != nil {
			return nil, err
		}
	}
	var crit []Criterion
	if v.opts.allowSimulated {
		crit = append(crit, Criterion{Check: CheckSimulated, Requirement: SimulatedAccepted})
	}
	if pol == nil {
		return crit, nil
	}
	prog, err := pol.Compile()
	if err != nil {
		return nil, err
	}
	v.program = prog
	for _, r := range pol.Rules {
		req := r.Name + ": " + r.Expr
		crit = append(crit, Criterion{Check: CheckPolicy, Requirement: fmt.Sprintf("[%s] %s", pol.Source(), req), Rule: r.Name})
	}
	if pol.Coverage != nil && pol.Coverage.Targets {
		crit = append(crit, Criterion{Check: CheckCoverage, Requirement: fmt.Sprintf("[%s] %s", pol.Source(), pol.Coverage.Requirement(v.opts.allowSimulated))})
	}
	return crit, nil
}

func matcher(v, re string) string {
	if v != "" {
		return fmt.Sprintf("= %q", v)
	}
	return fmt.Sprintf("~ /%s/", re)
}

// Criteria returns what the Verifier enforces, plus one subject criterion
// per artifact; without artifacts, one subject criterion that says no
// artifact is checked (or that one is required).
func (v *Verifier) Criteria(artifacts []Artifact) []Criterion {
	var out []Criterion
	for _, c := range v.criteria {
		if c.Check == CheckPolicy || c.Check == CheckSimulated || c.Check == CheckCoverage {
			break
		}
		out = append(out, c)
	}
	n := len(out)
	for _, a := range artifacts {
		out = append(out, Criterion{Check: CheckSubject, Requirement: fmt.Sprintf("%s (sha256:%s) is a subject of a verified bundle", a.Name, a.SHA256), Artifact: a.Name})
	}
	if len(artifacts) == 0 {
		req := NoArtifacts + ": the signatures and the policy are checked, no file is compared with the subjects"
		if v.opts.requireArtifacts {
			req = "at least one artifact, as required; " + NoArtifacts
		}
		out = append(out, Criterion{Check: CheckSubject, Requirement: req})
	}
	return append(out, v.criteria[n:]...)
}

// NoArtifacts is how criteria and reports say that no artifact was given.
const NoArtifacts = "0 artifacts checked"
