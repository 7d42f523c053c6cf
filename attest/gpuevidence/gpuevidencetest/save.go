package gpuevidencetest

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// CAFile is the file Save writes into a directory and Load reads.
const CAFile = "simulated-ca.pem"

func (ca *CA) issuers() []*Issuer {
	return []*Issuer{&ca.DeviceRoot, &ca.Identity, &ca.Provisioner, &ca.RIMRoot, &ca.RIMCA, &ca.RIMSigner}
}

// Save writes the CA, certificates and private keys, into dir as
// CAFile (mode 0600), for a simulated GPU in another process
// (GPUATTEST_FAKE_GPU_CA) to sign with; and the two roots beside it
// (WriteRoots) for the verifier.
func (ca *CA) Save(dir string) error {
	var b []byte
	for _, is := range ca.issuers() {
		key, ok := is.Key.(*ecdsa.PrivateKey)
		if !ok {
			return fmt.Errorf("%s: key is %T, expected ECDSA", is.Cert.Subject.CommonName, is.Key)
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.Cert.Raw})...)
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})...)
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), b, 0o600); err != nil {
		return err
	}
	_, _, err := ca.WriteRoots(dir)
	return err
}

// Load reads a CA that Save wrote into dir.
func Load(dir string) (*CA, error) {
	p := filepath.Join(dir, CAFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	ca := &CA{}
	for _, is := range ca.issuers() {
		var cb, kb *pem.Block
		cb, b = pem.Decode(b)
		kb, b = pem.Decode(b)
		if cb == nil || kb == nil || cb.Type != "CERTIFICATE" || kb.Type != "EC PRIVATE KEY" {
			return nil, fmt.Errorf("%s: expected a certificate and its EC key for each of the 6 issuers", p)
		}
		c, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		k, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		is.Cert, is.Key = c, k
	}
	return ca, nil
}
