package gpuevidence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// maxChainCerts bounds a certificate chain: NVIDIA's hold five.
const maxChainCerts = 10

// parseChain reads a PEM certificate chain, leaf first.
func parseChain(pemBytes []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := pemBytes
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("certificate chain: PEM block %d is %q, expected CERTIFICATE", len(certs)+1, b.Type)
		}
		if len(certs) == maxChainCerts {
			return nil, fmt.Errorf("certificate chain: more than %d certificates", maxChainCerts)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate chain: certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("certificate chain: bytes after the last PEM certificate")
	}
	if len(certs) == 0 {
		return nil, errors.New("certificate chain: no PEM certificate")
	}
	return certs, nil
}

// verifyChain checks that certs (leaf first) chain to root, every
// certificate valid at t, and returns the chain it built (leaf to root).
// The root may or may not end the chain; no other root is accepted,
// whatever the chain carries.
func verifyChain(certs []*x509.Certificate, root *x509.Certificate, t time.Time) ([]*x509.Certificate, error) {
	roots := x509.NewCertPool()
	roots.AddCert(root)
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		if !c.Equal(root) {
			inter.AddCert(c)
		}
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: t,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, fmt.Errorf("certificate chain of %q does not verify to %q at %s: %w", certs[0].Subject.CommonName, root.Subject.CommonName, t.UTC().Format(time.RFC3339), err)
	}
	return chains[0], nil
}

// verifyRawP384 checks sig (r||s, 48 bytes each) over SHA-384(msg)
// with the certificate's key, which must be an ECDSA P-384 key.
func verifyRawP384(cert *x509.Certificate, msg, sig []byte) error {
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P384() {
		return fmt.Errorf("certificate %q: key is not ECDSA P-384", cert.Subject.CommonName)
	}
	if len(sig) != signatureSize {
		return fmt.Errorf("signature: %d bytes, expected %d (P-384 r||s)", len(sig), signatureSize)
	}
	h := sha512.Sum384(msg)
	r := new(big.Int).SetBytes(sig[:signatureSize/2])
	s := new(big.Int).SetBytes(sig[signatureSize/2:])
	if !ecdsa.Verify(pub, h[:], r, s) {
		return errors.New("signature does not verify")
	}
	return nil
}

// The DICE extensions NVIDIA puts the firmware's FWID in: Hopper's leaf
// carries 2.23.133.5.4.1 (tcg-dice-TcbInfo, in NVIDIA's own layout:
// version, key, FWID), Blackwell's 2.23.133.5.4.1.1 (a TCG TcbInfo whose
// fwids [6] list starts with the firmware's).
var (
	oidFWIDHopper    = asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1}
	oidFWIDBlackwell = asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1, 1}
	oidSHA384        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
)

type fwidEntry struct {
	HashAlg asn1.ObjectIdentifier
	Digest  []byte
}

// leafFWID returns the FWID of the leaf's DICE extension for arch.
func leafFWID(leaf *x509.Certificate, arch Arch) ([]byte, error) {
	oid := oidFWIDHopper
	if arch == ArchBlackwell {
		oid = oidFWIDBlackwell
	}
	var val []byte
	for _, e := range leaf.Extensions {
		if e.Id.Equal(oid) {
			if val != nil {
				return nil, fmt.Errorf("leaf certificate: extension %s appears twice", oid)
			}
			val = e.Value
		}
	}
	if val == nil {
		return nil, fmt.Errorf("leaf certificate %q: no FWID extension %s (%s)", leaf.Subject.CommonName, oid, arch)
	}
	var seq asn1.RawValue
	if rest, err := asn1.Unmarshal(val, &seq); err != nil || len(rest) != 0 || seq.Tag != asn1.TagSequence || !seq.IsCompound {
		return nil, fmt.Errorf("leaf certificate: FWID extension %s is not a DER SEQUENCE", oid)
	}
	elems, err := derElements(seq.Bytes)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate: FWID extension %s: %w", oid, err)
	}
	var list []asn1.RawValue
	if arch == ArchBlackwell {
		// TcbInfo: the fwids [6] IMPLICIT SEQUENCE OF FWID.
		for _, e := range elems {
			if e.Class == asn1.ClassContextSpecific && e.Tag == 6 && e.IsCompound {
				if list, err = derElements(e.Bytes); err != nil {
					return nil, fmt.Errorf("leaf certificate: FWID extension %s fwids: %w", oid, err)
				}
				break
			}
		}
	} else {
		for _, e := range elems {
			if e.Class == asn1.ClassUniversal && e.Tag == asn1.TagSequence {
				list = append(list, e)
			}
		}
		// NVIDIA's Hopper layout holds the key (a SEQUENCE too) before
		// the FWID: keep the SEQUENCEs that are FWIDs.
		var fw []asn1.RawValue
		for _, e := range list {
			var f fwidEntry
			if _, err := asn1.Unmarshal(e.FullBytes, &f); err == nil && f.HashAlg.Equal(oidSHA384) {
				fw = append(fw, e)
			}
		}
		if len(fw) > 1 {
			return nil, fmt.Errorf("leaf certificate: FWID extension %s holds %d FWIDs, expected 1", oid, len(fw))
		}
		list = fw
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("leaf certificate: FWID extension %s holds no FWID", oid)
	}
	var f fwidEntry
	if rest, err := asn1.Unmarshal(list[0].FullBytes, &f); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("leaf certificate: FWID extension %s: first FWID is not a (hashAlg, digest) SEQUENCE", oid)
	}
	if !f.HashAlg.Equal(oidSHA384) || len(f.Digest) != sha512.Size384 {
		return nil, fmt.Errorf("leaf certificate: FWID extension %s: FWID is %s of %d bytes, expected SHA-384 (48 bytes)", oid, f.HashAlg, len(f.Digest))
	}
	return f.Digest, nil
}

// derElements splits the content of a constructed DER value.
func derElements(b []byte) ([]asn1.RawValue, error) {
	var out []asn1.RawValue
	for len(b) > 0 {
		var v asn1.RawValue
		rest, err := asn1.Unmarshal(b, &v)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		b = rest
	}
	return out, nil
}

// chainCache remembers device chains verified up to the root, by their
// upper part (the certificates from the third on: the provisioner ICA and
// above, which every GPU of a kind shares), so that each further GPU's
// chain costs the checks of its own two certificates rather than all of
// them. It is per Verifier: one root and one time.
type chainCache struct {
	mu    sync.Mutex
	upper map[[32]byte][]*x509.Certificate
}

// upperKey identifies certs[2:] (the shared part) by content.
func upperKey(certs []*x509.Certificate) [32]byte {
	h := sha256.New()
	for _, c := range certs {
		h.Write(c.Raw)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// sharedUpper is how many certificates of a device chain are its own
// (the leaf and the BROM certificate); the rest may be cached.
const sharedUpper = 2

// verify is verifyChain with the cache: a chain whose upper part was
// verified before is checked from the leaf to that part's first
// certificate, which then serves as the anchor. The cached part's path
// length limits are checked against the whole chain; an upper part with
// name constraints is never used as an anchor.
func (cc *chainCache) verify(certs []*x509.Certificate, root *x509.Certificate, t time.Time) ([]*x509.Certificate, error) {
	if len(certs) <= sharedUpper+1 {
		return verifyChain(certs, root, t)
	}
	key := upperKey(certs[sharedUpper:])
	cc.mu.Lock()
	upper, ok := cc.upper[key]
	cc.mu.Unlock()
	if !ok {
		built, err := verifyChain(certs, root, t)
		if err != nil {
			return nil, err
		}
		// Cache the built chain's part above the GPU's own certificates
		// when it is exactly the given upper part (plus the root).
		if len(built) > sharedUpper && built[sharedUpper].Equal(certs[sharedUpper]) && cacheable(built[sharedUpper:]) {
			cc.mu.Lock()
			if cc.upper == nil {
				cc.upper = map[[32]byte][]*x509.Certificate{}
			}
			cc.upper[key] = built[sharedUpper:]
			cc.mu.Unlock()
		}
		return built, nil
	}
	anchor := x509.NewCertPool()
	anchor.AddCert(upper[0])
	inter := x509.NewCertPool()
	for _, c := range certs[1:sharedUpper] {
		inter.AddCert(c)
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{
		Roots: anchor, Intermediates: inter, CurrentTime: t,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, fmt.Errorf("certificate chain of %q does not verify to %q at %s: %w", certs[0].Subject.CommonName, root.Subject.CommonName, t.UTC().Format(time.RFC3339), err)
	}
	own := chains[0]
	if len(own) != sharedUpper+1 {
		return nil, fmt.Errorf("certificate chain of %q: %d certificates below %q, expected %d", certs[0].Subject.CommonName, len(own)-1, upper[0].Subject.CommonName, sharedUpper)
	}
	full := append(own[:sharedUpper:sharedUpper], upper...)
	// Path length: a CA at position i has i-1 CA certificates below it
	// (the leaf is not counted).
	for i := sharedUpper; i < len(full); i++ {
		c := full[i]
		if c.BasicConstraintsValid && c.MaxPathLen >= 0 && (c.MaxPathLen > 0 || c.MaxPathLenZero) && i-1 > c.MaxPathLen {
			return nil, fmt.Errorf("certificate chain of %q: %q allows %d CAs below it, the chain has %d", certs[0].Subject.CommonName, c.Subject.CommonName, c.MaxPathLen, i-1)
		}
	}
	return full, nil
}

// cacheable reports whether a verified upper chain may anchor others:
// none of its certificates constrains names (which the shortened check
// would not apply to the certificates below).
func cacheable(upper []*x509.Certificate) bool {
	for _, c := range upper {
		if c.PermittedDNSDomainsCritical || len(c.PermittedDNSDomains) > 0 || len(c.ExcludedDNSDomains) > 0 ||
			len(c.PermittedIPRanges) > 0 || len(c.ExcludedIPRanges) > 0 || len(c.PermittedEmailAddresses) > 0 ||
			len(c.ExcludedEmailAddresses) > 0 || len(c.PermittedURIDomains) > 0 || len(c.ExcludedURIDomains) > 0 {
			return false
		}
	}
	return true
}
