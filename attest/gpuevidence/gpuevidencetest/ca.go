// Package gpuevidencetest makes simulated NVIDIA GPU evidence: a test
// PKI shaped like NVIDIA's (a device identity root over per-GPU chains, a
// RIM signing root over a RIM signer), SPDM 1.1 attestation reports
// signed by simulated GPUs, RIMs signed with XML-DSig, and OCSP answers.
//
// Everything it makes says SIMULATED in its certificates' names, and
// verifies only under the roots it generates (gpuevidence.WithDeviceRoot,
// WithRIMRoot: --gpu-root, --rim-root), never under NVIDIA's pinned ones.
// Tests, benchmarks and the simulated GPU (GPUATTEST_FAKE_GPU) use it.
package gpuevidencetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/ocsp"
)

// Simulated marks every certificate this package makes.
const Simulated = "SIMULATED"

// Organization is the O of every certificate this package makes.
const Organization = "gpuattest simulated GPU (not NVIDIA)"

// Issuer is a certificate and its key.
type Issuer struct {
	// Cert is the certificate.
	Cert *x509.Certificate
	// Key is its private key.
	Key crypto.Signer
}

// CA is a simulated NVIDIA PKI.
type CA struct {
	// DeviceRoot stands for the NVIDIA Device Identity CA.
	DeviceRoot Issuer
	// Identity and Provisioner stand for the per-architecture identity
	// CA and the provisioner ICA below it; GPUs' BROM certificates are
	// issued by Provisioner.
	Identity, Provisioner Issuer
	// RIMRoot stands for the NVIDIA CoRIM signing root, RIMCA for the
	// reference value CA below it that issues RIM signers.
	RIMRoot, RIMCA Issuer
	// RIMSigner signs RIMs; see NewRIMSigner for one with another
	// validity.
	RIMSigner Issuer
}

// NewCA generates a fresh simulated PKI. Its certificates are valid
// from notBefore for ten years; the RIM signer for one year.
func NewCA(notBefore time.Time) (*CA, error) {
	ca := &CA{}
	var err error
	end := notBefore.AddDate(10, 0, 0)
	if ca.DeviceRoot, err = newIssuer(nil, Simulated+" Device Identity CA", true, notBefore, end); err != nil {
		return nil, err
	}
	if ca.Identity, err = newIssuer(&ca.DeviceRoot, Simulated+" GH100 Identity", true, notBefore, end); err != nil {
		return nil, err
	}
	if ca.Provisioner, err = newIssuer(&ca.Identity, Simulated+" GH100 Provisioner ICA", true, notBefore, end); err != nil {
		return nil, err
	}
	if ca.RIMRoot, err = newIssuer(nil, Simulated+" CoRIM signing Root CA", true, notBefore, end); err != nil {
		return nil, err
	}
	if ca.RIMCA, err = newIssuer(&ca.RIMRoot, Simulated+" Reference Value CA", true, notBefore, end); err != nil {
		return nil, err
	}
	if ca.RIMSigner, err = ca.NewRIMSigner(notBefore, notBefore.AddDate(1, 0, 0)); err != nil {
		return nil, err
	}
	return ca, nil
}

// NewRIMSigner issues a RIM signer valid from notBefore to notAfter (an
// expired RIM's signer, for instance).
func (ca *CA) NewRIMSigner(notBefore, notAfter time.Time) (Issuer, error) {
	return newIssuer(&ca.RIMCA, Simulated+" RIM Signer", false, notBefore, notAfter)
}

// nextSerial is a random positive 127-bit serial, unique across CAs.
func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n.Add(n, big.NewInt(1))
}

func newIssuer(parent *Issuer, cn string, isCA bool, notBefore, notAfter time.Time, exts ...pkix.Extension) (Issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		return Issuer{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:    nextSerial(),
		Subject:         pkix.Name{CommonName: cn, Organization: []string{Organization}},
		NotBefore:       notBefore,
		NotAfter:        notAfter,
		ExtraExtensions: exts,
		OCSPServer:      []string{"http://ocsp.simulated.invalid"},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	} else {
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	signer, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return Issuer{}, fmt.Errorf("issuing %q: %w", cn, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return Issuer{}, err
	}
	return Issuer{Cert: c, Key: key}, nil
}

// PEM encodes certificates as PEM.
func PEM(certs ...*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

// WriteRoots writes the device and RIM roots as PEM files into dir
// ("gpu-root.pem", "rim-root.pem") and returns their paths.
func (ca *CA) WriteRoots(dir string) (gpuRoot, rimRoot string, err error) {
	gpuRoot, rimRoot = filepath.Join(dir, "gpu-root.pem"), filepath.Join(dir, "rim-root.pem")
	if err := os.WriteFile(gpuRoot, PEM(ca.DeviceRoot.Cert), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(rimRoot, PEM(ca.RIMRoot.Cert), 0o644); err != nil {
		return "", "", err
	}
	return gpuRoot, rimRoot, nil
}

// OCSPStatus is an OCSP answer's status.
type OCSPStatus int

// The statuses an OCSP answer may give.
const (
	OCSPGood    = OCSPStatus(ocsp.Good)
	OCSPRevoked = OCSPStatus(ocsp.Revoked)
	OCSPUnknown = OCSPStatus(ocsp.Unknown)
)

// OCSP makes a DER OCSP response about cert, signed by its issuer
// directly, current from thisUpdate to nextUpdate; revokedAt applies
// to OCSPRevoked.
func OCSP(cert *x509.Certificate, issuer Issuer, status OCSPStatus, thisUpdate, nextUpdate, revokedAt time.Time) ([]byte, error) {
	return ocsp.CreateResponse(issuer.Cert, issuer.Cert, ocsp.Response{
		Status:       int(status),
		SerialNumber: cert.SerialNumber,
		ThisUpdate:   thisUpdate,
		NextUpdate:   nextUpdate,
		RevokedAt:    revokedAt,
	}, issuer.Key)
}
