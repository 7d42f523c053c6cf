package verify

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/internal/jsonstrict"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
)

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

// verifyBundle runs the cryptographic checks of one bundle, then reads
// its statement.
func (v *Verifier) verifyBundle(r *Report, e Entry) BundleResult {
	br := BundleResult{Source: e.Source}
	if len(e.Data) > 0 {
		sum := sha256.Sum256(e.Data)
		br.Digest = "sha256:" + hex.EncodeToString(sum[:])
	}
	if e.Problem != "" {
		r.add(Check{Check: CheckSignature, Target: e.Source, Detail: e.Problem})
		r.fail(FailureSignature)
		return br
	}
	if n := int64(len(e.Data)); n > v.opts.maxEntrySize() {
		r.add(Check{Check: CheckSignature, Target: e.Source, Detail: fmt.Sprintf("bundle not read: it is %s, more than the %s a bundle may be\n%s",
			limits.Human(n), limits.Human(v.opts.maxEntrySize()), v.opts.limitHint())})
		r.fail(FailureError)
		return br
	}
	if err := jsonstrict.Check(e.Data, MaxBundleDepth); err != nil {
		r.add(Check{Check: CheckSignature, Target: e.Source, Detail: "not a valid Sigstore bundle: " + err.Error()})
		r.fail(FailureSignature)
		return br
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(e.Data); err != nil {
		r.add(Check{Check: CheckSignature, Target: e.Source, Detail: "not a valid Sigstore bundle: " + err.Error()})
		r.fail(FailureSignature)
		return br
	}
	if b.Bundle != nil && b.GetMessageSignature() != nil {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: "bundle holds a plain message signature (cosign sign-blob), not an in-toto attestation; hint: sign a statement (gpuattest sign, cosign attest-blob)"})
		r.fail(FailurePolicy)
		return br
	}
	if typ := v.leftOutType(&b); typ != "" {
		r.add(Check{Check: CheckStatement, Target: e.Source, Passed: true, Detail: "left out, unverified: predicate type " + typ + " is no part of this verification"})
		br.leftOut = true
		return br
	}
	keyids := dropKeyIDs(&b)
	if !v.checkSignature(r, e, &b, &br, keyids) {
		return br
	}
	v.readStatement(r, e, &b, &br)
	return br
}

// leftOutType is the predicate type of b's statement, as its payload
// says before any check, when the Verifier leaves that type out
// (WithLeftOut); "" otherwise.
func (v *Verifier) leftOutType(b *bundle.Bundle) string {
	env := b.GetDsseEnvelope()
	if len(v.opts.leftOut) == 0 || env == nil || env.GetPayloadType() != attest.PayloadType || int64(len(env.GetPayload())) > v.opts.maxPredicateSize {
		return ""
	}
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	if json.Unmarshal(env.GetPayload(), &st) != nil || st.PredicateType == v.opts.predicateType || !slices.Contains(v.opts.leftOut, st.PredicateType) {
		return ""
	}
	return st.PredicateType
}

// dropKeyIDs clears the keyid of every DSSE signature of b and returns
// those that were set. A DSSE keyid is an unauthenticated hint (the DSSE
// spec; it is not signed): like the key hint it never selects or rules
// out the key, which sigstore-go would otherwise do, failing a valid
// signature whose keyid names another key while an empty one verifies.
func dropKeyIDs(b *bundle.Bundle) []string {
	env := b.GetDsseEnvelope()
	if env == nil {
		return nil
	}
	var ids []string
	for _, sig := range env.GetSignatures() {
		if sig.GetKeyid() != "" {
			ids = append(ids, sig.GetKeyid())
			sig.Keyid = ""
		}
	}
	return ids
}

// checkSignature verifies b's signature, identity and timestamps and
// records the checks; it reports whether they held.
func (v *Verifier) checkSignature(r *Report, e Entry, b *bundle.Bundle, br *BundleResult, keyids []string) bool {
	var pol sgverify.PolicyBuilder
	if v.identity != nil {
		pol = sgverify.NewPolicy(sgverify.WithoutArtifactUnsafe(), sgverify.WithCertificateIdentity(*v.identity))
	} else {
		pol = sgverify.NewPolicy(sgverify.WithoutArtifactUnsafe(), sgverify.WithKey())
	}
	res, err := v.sv.Verify(b, pol)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "failed to fetch envelope statement") {
			// sigstore-go reads the statement after the signature held.
			r.add(Check{Check: CheckStatement, Target: e.Source, Detail: "signature valid, but the payload is not an in-toto statement: " + msg})
			r.fail(FailurePolicy)
			return false
		}
		check := CheckSignature
		switch {
		case strings.Contains(msg, "certificate identit"):
			check = CheckIdentity
		case strings.Contains(msg, "log inclusion"), strings.Contains(msg, "timestamp"):
			check = CheckTimestamps
		}
		r.add(Check{Check: check, Target: e.Source, Detail: msg})
		r.fail(FailureSignature)
		return false
	}
	switch {
	case res.Signature != nil && res.Signature.Certificate != nil:
		br.Signer = fmt.Sprintf("certificate for %s (issuer %s)", res.Signature.Certificate.SubjectAlternativeName, res.Signature.Certificate.Issuer)
	default:
		fp, _ := keyFingerprint(v.opts.key)
		br.Signer = "key " + fp
	}
	detail := "signed by " + br.Signer
	if res.Signature != nil && res.Signature.PublicKeyID != nil {
		detail += v.hintNote(string(*res.Signature.PublicKeyID))
	}
	if len(keyids) > 0 {
		detail += fmt.Sprintf(" (DSSE keyid %q: advisory, not used)", strings.Join(keyids, ","))
	}
	r.add(Check{Check: CheckSignature, Target: e.Source, Passed: true, Detail: detail})
	if v.identity != nil {
		r.add(Check{Check: CheckIdentity, Target: e.Source, Passed: true, Detail: br.Signer})
	}
	if n := len(res.VerifiedTimestamps); n > 0 {
		var parts []string
		for _, ts := range res.VerifiedTimestamps {
			parts = append(parts, fmt.Sprintf("%s %s", ts.Type, ts.Timestamp.UTC().Format(time.RFC3339)))
			if t := ts.Timestamp.UTC(); br.SignedAt == nil || t.Before(*br.SignedAt) {
				br.SignedAt = &t
			}
		}
		r.add(Check{Check: CheckTimestamps, Target: e.Source, Passed: true, Detail: strings.Join(parts, ", ")})
	}
	return true
}

// hintNote says when a key-signed bundle's key hint names another key
// than the one given. The hint is advisory: a bundle is verified against
// the key given whatever its hint says (empty, another key's, or
// anything), so the note informs and decides nothing.
func (v *Verifier) hintNote(hint string) string {
	if hint == "" || v.opts.key == nil {
		return ""
	}
	der, err := x509.MarshalPKIXPublicKey(v.opts.key)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	if hint == base64.StdEncoding.EncodeToString(sum[:]) {
		return ""
	}
	return fmt.Sprintf(" (the bundle's key hint %q names another key; hints are advisory, the signature was checked against the key given)", hint)
}

// readStatement decodes the signed statement of a verified bundle into
// br; a bundle whose statement is not valid fails the statement check.
func (v *Verifier) readStatement(r *Report, e Entry, b *bundle.Bundle, br *BundleResult) {
	env, err := b.Envelope()
	if err != nil {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: "bundle has no DSSE envelope: " + err.Error()})
		r.fail(FailurePolicy)
		return
	}
	raw := env.RawEnvelope()
	if raw.PayloadType != attest.PayloadType {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: fmt.Sprintf("payload type %q: expected %q", raw.PayloadType, attest.PayloadType)})
		r.fail(FailurePolicy)
		return
	}
	payload, err := raw.DecodeB64Payload()
	if n := int64(len(payload)); err == nil && n > v.opts.maxPredicateSize {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: fmt.Sprintf("statement not read: it is %s, more than the limit of %s\n%s",
			limits.Human(n), limits.Human(v.opts.maxPredicateSize), v.opts.limitHint())})
		r.fail(FailureError)
		return
	}
	if err == nil {
		br.statement, err = attest.ParseStatement(payload)
	}
	if err != nil {
		r.add(Check{Check: CheckStatement, Target: e.Source, Detail: err.Error()})
		r.fail(FailurePolicy)
		return
	}
	br.Verified = true
	br.PredicateType = br.statement.PredicateType
	br.Subjects = br.statement.Subject
}
