package gpuevidence

import (
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// The pinned roots. Each file names its source (NVIDIA's
// attestation-sdk, Apache License 2.0: roots/LICENSE) and fingerprint.
var (
	//go:embed roots/nvidia-device-identity-ca.pem
	deviceRootPEM []byte
	//go:embed roots/nvidia-rim-root.pem
	rimRootPEM []byte
)

// NVIDIADeviceRoot returns the pinned NVIDIA Device Identity CA, the root
// of every GPU's device certificate chain.
func NVIDIADeviceRoot() *x509.Certificate { return mustRoot(deviceRootPEM) }

// NVIDIARIMRoot returns the pinned NVIDIA CoRIM signing Root CA, the root
// of the certificates that sign NVIDIA's reference measurements (RIMs).
func NVIDIARIMRoot() *x509.Certificate { return mustRoot(rimRootPEM) }

func mustRoot(b []byte) *x509.Certificate {
	c, err := parseRoot(b)
	if err != nil {
		panic("gpuevidence: embedded root: " + err.Error())
	}
	return c
}

func parseRoot(b []byte) (*x509.Certificate, error) {
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, errors.New("more than one PEM block: a root file holds one certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, err
	}
	if !c.IsCA {
		return nil, fmt.Errorf("%q is not a CA certificate", c.Subject.CommonName)
	}
	return c, nil
}

// LoadRoot reads a root certificate (one PEM CERTIFICATE) from path,
// for --gpu-root and --rim-root: a root other than NVIDIA's marks every
// GPU verified under it as not NVIDIA-rooted.
func LoadRoot(path string) (*x509.Certificate, error) {
	b, err := limits.ReadFile(path, 64<<10, "root certificate")
	if err != nil {
		return nil, err
	}
	c, err := parseRoot(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
