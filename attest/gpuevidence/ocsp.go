package gpuevidence

import (
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"golang.org/x/crypto/ocsp"
)

// Bounds on stored OCSP answers.
const (
	// MaxOCSPBytes bounds one stored OCSP response.
	MaxOCSPBytes = 64 << 10
	// maxOCSPResponses bounds the responses a verifier holds.
	maxOCSPResponses = 4096
	// ocspSkew is how far before an answer's thisUpdate the recorded
	// time may lie (clocks of the collecting node and the responder).
	ocspSkew = 10 * time.Minute
)

// Revocation says what the stored OCSP answers showed for a chain.
type Revocation string

// The revocation outcomes.
const (
	// RevocationGood: every certificate that has an OCSP responder was
	// answered "good", as of the recorded time.
	RevocationGood Revocation = "good"
	// RevocationPartial: some certificates were answered "good", others
	// have no stored answer.
	RevocationPartial Revocation = "partial"
	// RevocationNotChecked: no stored answer covers the chain.
	RevocationNotChecked Revocation = "not-checked"
)

// ocspStore holds stored OCSP responses by the serial they answer for.
type ocspStore struct {
	bySerial map[string][][]byte
}

func newOCSPStore(ders [][]byte) (*ocspStore, error) {
	if len(ders) > maxOCSPResponses {
		return nil, fmt.Errorf("OCSP: %d responses, more than %d", len(ders), maxOCSPResponses)
	}
	s := &ocspStore{bySerial: map[string][][]byte{}}
	for i, der := range ders {
		if len(der) > MaxOCSPBytes {
			return nil, fmt.Errorf("OCSP response %d: larger than %d bytes", i+1, MaxOCSPBytes)
		}
		r, err := ocsp.ParseResponse(der, nil)
		if err != nil {
			return nil, fmt.Errorf("OCSP response %d: %w", i+1, err)
		}
		k := r.SerialNumber.String()
		s.bySerial[k] = append(s.bySerial[k], der)
	}
	return s, nil
}

// check judges the stored answers for chain (leaf first) as of t: the
// certificates from first up to, not including, the root (the last
// certificate; a device chain's leaf changes at every boot and has no
// responder, so device chains start at 1). A certificate revoked at or
// before t, or answered "unknown", is a problem; an answer not current
// at t is not used.
func (s *ocspStore) check(chain []*x509.Certificate, first int, t time.Time) (Revocation, []error) {
	if s == nil {
		return RevocationNotChecked, nil
	}
	var errs []error
	checked, total := 0, 0
	for i := first; i < len(chain)-1; i++ {
		cert, issuer := chain[i], chain[i+1]
		total++
		st, err := s.answer(cert, issuer, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st {
			checked++
		}
	}
	switch {
	case checked == 0:
		return RevocationNotChecked, errs
	case checked < total:
		return RevocationPartial, errs
	}
	return RevocationGood, errs
}

// answer reports whether a stored answer says cert was good at t; false
// with no error when no stored answer applies.
func (s *ocspStore) answer(cert, issuer *x509.Certificate, t time.Time) (bool, error) {
	for _, der := range s.bySerial[cert.SerialNumber.String()] {
		r, err := ocsp.ParseResponseForCert(der, cert, issuer)
		if err != nil {
			// Another issuer's certificate with the same serial, or a
			// forged answer: not an answer for this certificate.
			continue
		}
		if r.Certificate != nil {
			if !slices.Contains(r.Certificate.ExtKeyUsage, x509.ExtKeyUsageOCSPSigning) {
				return false, fmt.Errorf("OCSP answer for %q: signed by %q, which is not an OCSP responder (no OCSPSigning usage)", cert.Subject.CommonName, r.Certificate.Subject.CommonName)
			}
			if t.Before(r.Certificate.NotBefore) || t.After(r.Certificate.NotAfter) {
				return false, fmt.Errorf("OCSP answer for %q: responder certificate not valid at %s", cert.Subject.CommonName, t.UTC().Format(time.RFC3339))
			}
		}
		if r.Status == ocsp.Revoked && !r.RevokedAt.After(t) {
			return false, fmt.Errorf("certificate %q (serial %s) was revoked at %s, before the recorded time %s", cert.Subject.CommonName, cert.SerialNumber, r.RevokedAt.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
		}
		if t.Add(ocspSkew).Before(r.ThisUpdate) || (!r.NextUpdate.IsZero() && t.After(r.NextUpdate)) {
			// Not current at t: says nothing about t.
			continue
		}
		switch r.Status {
		case ocsp.Good:
			return true, nil
		case ocsp.Revoked:
			// Revoked after t: good as of t.
			return true, nil
		default:
			return false, fmt.Errorf("certificate %q (serial %s): OCSP answered unknown", cert.Subject.CommonName, cert.SerialNumber)
		}
	}
	return false, nil
}
