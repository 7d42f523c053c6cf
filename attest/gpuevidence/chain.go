package gpuevidence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
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
