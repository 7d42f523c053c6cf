package verify

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/sigstore/sigstore-go/pkg/root"
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
	policyCost    uint64
	// maxPredicateSize bounds the DSSE payload; see limits.go.
	maxPredicateSize int64
	requireArtifacts bool
	allowSimulated   bool
	leftOut          []string
	logger           *slog.Logger
	now              func() time.Time
	// GPU evidence (gpuevidence.go).
	gpuEvidence        []gpuevidence.Option
	gpuEvidenceSet     bool
	requireGPUEvidence bool
}

func defaultOptions() options {
	return options{
		predicateType:    attest.ValidationPredicateType,
		policyCost:       policy.DefaultCostLimit,
		maxPredicateSize: DefaultMaxPredicateSize,
		logger:           slog.New(slog.DiscardHandler),
		now:              time.Now,
	}
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

// WithPolicy sets the policy (default policy.Default, or its variant that
// accepts simulated hardware with WithSimulatedAllowed, for the validation
// predicate type, no rules for other types).
func WithPolicy(p *policy.Policy) Option {
	return func(o *options) error { o.policy = p; return nil }
}

// WithPolicyCostLimit sets the most the policy may cost over all the
// bundles of one Verify call, in cel-go's cost units (default
// policy.DefaultCostLimit, about a second of CPU time). A rule stopped by
// the limit fails the verification as an error (FailureError): it was
// not decided.
func WithPolicyCostLimit(units uint64) Option {
	return func(o *options) error {
		if units == 0 {
			return errors.New("policy cost limit: expected a positive number of units")
		}
		o.policyCost = units
		return nil
	}
}

// WithMaxPredicateSize sets the largest signed statement (its predicate
// and subjects) Verify accepts, in bytes (default
// DefaultMaxPredicateSize). Bundles and bundle files are bounded by it
// too: a bundle may be its base64 size plus 1 MiB, a file 8 such
// bundles. Anything larger is refused as an error with the limit named.
func WithMaxPredicateSize(bytes int64) Option {
	return func(o *options) error {
		if bytes <= 0 {
			return fmt.Errorf("max predicate size %d: expected a positive number of bytes", bytes)
		}
		o.maxPredicateSize = bytes
		return nil
	}
}

// WithArtifactsRequired makes a Verify call without artifacts fail as a
// subject failure. Without it such a call checks signatures and the
// policy only, and its report says that no artifact was checked.
func WithArtifactsRequired() Option {
	return func(o *options) error { o.requireArtifacts = true; return nil }
}

// WithSimulatedAllowed accepts simulated hardware (GPUATTEST_FAKE_GPU),
// for tests and demos: the built-in policies drop their "not simulated"
// rules, and a simulated GPU counts for target coverage whatever backend
// ran. The criteria and the report say so.
func WithSimulatedAllowed() Option {
	return func(o *options) error { o.allowSimulated = true; return nil }
}

// WithLeftOut leaves out, unverified and unjudged, every bundle whose
// statement has one of predicateTypes (read from its payload before any
// check): bundles that belong to another verification, such as a fleet
// release's dispatch and node statements beside an ordinary release's.
// A check says which were left out. A bundle left out can make the
// verification neither pass nor fail; one of the Verifier's own
// predicate type is never left out.
func WithLeftOut(predicateTypes ...string) Option {
	return func(o *options) error { o.leftOut = append(o.leftOut, predicateTypes...); return nil }
}

// WithLogger sets the logger for diagnostics (default, and nil: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		o.logger = l
		return nil
	}
}
