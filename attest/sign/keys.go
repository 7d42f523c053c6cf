package sign

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PEM block types of private keys.
const (
	// SigstorePrivateKeyPEMType is cosign's current encrypted key type.
	SigstorePrivateKeyPEMType = "ENCRYPTED SIGSTORE PRIVATE KEY"
	// CosignPrivateKeyPEMType is cosign's older encrypted key type.
	CosignPrivateKeyPEMType = "ENCRYPTED COSIGN PRIVATE KEY"
)

// ErrWrongPassword is returned when a key cannot be decrypted with the
// password given.
var ErrWrongPassword = errors.New("decrypting private key: wrong password or corrupt key")

// Keypair is a private key that signs bundles; it implements sigstore-go's
// sign.Keypair.
type Keypair struct {
	priv crypto.Signer
	alg  signature.AlgorithmDetails
	hint []byte
}

var _ sgsign.Keypair = (*Keypair)(nil)

// NewKeypair wraps an ECDSA (P-256/384/521), RSA or Ed25519 private key.
func NewKeypair(priv crypto.Signer) (*Keypair, error) {
	var details protocommon.PublicKeyDetails
	switch k := priv.Public().(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			details = protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
		case elliptic.P384():
			details = protocommon.PublicKeyDetails_PKIX_ECDSA_P384_SHA_384
		case elliptic.P521():
			details = protocommon.PublicKeyDetails_PKIX_ECDSA_P521_SHA_512
		default:
			return nil, fmt.Errorf("unsupported ECDSA curve %s", k.Curve.Params().Name)
		}
	default:
		alg, err := signature.GetDefaultAlgorithmDetails(priv.Public())
		if err != nil {
			return nil, fmt.Errorf("unsupported key: %w", err)
		}
		details = alg.GetSignatureAlgorithm()
	}
	alg, err := signature.GetAlgorithmDetails(details)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return &Keypair{priv: priv, alg: alg, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

// GetHashAlgorithm returns the hash algorithm of the signatures.
func (k *Keypair) GetHashAlgorithm() protocommon.HashAlgorithm { return k.alg.GetProtoHashType() }

// GetSigningAlgorithm returns the signing algorithm.
func (k *Keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.alg.GetSignatureAlgorithm()
}

// GetHint returns the base64 sha256 of the DER public key.
func (k *Keypair) GetHint() []byte { return k.hint }

// GetKeyAlgorithm returns "ECDSA", "RSA" or "ED25519".
func (k *Keypair) GetKeyAlgorithm() string {
	switch k.alg.GetKeyType() {
	case signature.ECDSA:
		return "ECDSA"
	case signature.RSA:
		return "RSA"
	case signature.ED25519:
		return "ED25519"
	}
	return ""
}

// GetPublicKey returns the public key.
func (k *Keypair) GetPublicKey() crypto.PublicKey { return k.priv.Public() }

// GetPublicKeyPem returns the public key as PEM.
func (k *Keypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.priv.Public())
	return string(b), err
}

// SignData signs data (hashing it first except for pure Ed25519) and
// returns the signature and what was signed.
func (k *Keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	hf := k.alg.GetHashType()
	toSign := data
	if hf != crypto.Hash(0) {
		h := hf.New()
		h.Write(data)
		toSign = h.Sum(nil)
	}
	sig, err := k.priv.Sign(rand.Reader, toSign, hf)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: %w", err)
	}
	return sig, toSign, nil
}

// EncryptPrivateKey returns priv as a cosign-format encrypted PEM
// ("ENCRYPTED SIGSTORE PRIVATE KEY").
func EncryptPrivateKey(priv crypto.PrivateKey, password []byte) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	enc, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, fmt.Errorf("encrypting private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: SigstorePrivateKeyPEMType, Bytes: enc}), nil
}

// ParsePrivateKey decodes a private key PEM: cosign's encrypted formats
// (decrypted with password), or unencrypted PKCS #8 / EC / PKCS #1 keys.
func ParsePrivateKey(pemBytes, password []byte) (*Keypair, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("no PEM block found\nhint: expected a key made by 'gpuattest key generate' or 'cosign generate-key-pair'")
	}
	var key any
	var err error
	switch block.Type {
	case SigstorePrivateKeyPEMType, CosignPrivateKeyPEMType:
		der, derr := encrypted.Decrypt(block.Bytes, password)
		if derr != nil {
			return nil, ErrWrongPassword
		}
		key, err = x509.ParsePKCS8PrivateKey(der)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block type %q: expected %q\nhint: is this a public key? signing needs the private key (NAME.key)", block.Type, SigstorePrivateKeyPEMType)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	return NewKeypair(signer)
}

// LoadPrivateKey reads the private key file at path.
func LoadPrivateKey(path string, password []byte) (*Keypair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading private key: %w", err)
	}
	k, err := ParsePrivateKey(b, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// maxPublicKey is the largest public key file read.
const maxPublicKey = 64 << 10

// LoadPublicKey reads a PEM public key file (a regular file, at most
// 64 KiB).
func LoadPublicKey(path string) (crypto.PublicKey, error) {
	b, err := limits.ReadFile(path, maxPublicKey, "public key")
	if err != nil {
		return nil, fmt.Errorf("reading public key: %w", err)
	}
	return ParsePublicKey(path, b)
}

// MaxPublicKeySize is the largest public key file LoadPublicKey reads.
const MaxPublicKeySize = maxPublicKey

// ParsePublicKey parses the PEM public key b, read from name (for
// messages).
func ParsePublicKey(name string, b []byte) (crypto.PublicKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: parsing public key: %w\nhint: expected a PEM \"PUBLIC KEY\" such as NAME.pub from 'gpuattest key generate'", name, err)
	}
	return pub, nil
}

// KeyPairFiles are the files GenerateKeyPair wrote.
type KeyPairFiles struct {
	// Private is the encrypted private key file (NAME.key).
	Private string
	// Public is the public key file (NAME.pub).
	Public string
}

// GenerateKeyPair makes a new ECDSA P-256 key and writes prefix.key
// (encrypted with password, mode 0600) and prefix.pub. It refuses to
// overwrite either file; each is written atomically.
func GenerateKeyPair(prefix string, password []byte) (*KeyPairFiles, error) {
	files := &KeyPairFiles{Private: prefix + ".key", Public: prefix + ".pub"}
	for _, p := range []string{files.Private, files.Public} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%s already exists: refusing to overwrite it\nhint: choose another --output-key-prefix or remove the file", p)
		}
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	privPEM, err := EncryptPrivateKey(priv, password)
	if err != nil {
		return nil, err
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	if err := atomicfile.WriteNew(files.Private, privPEM, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteNew(files.Public, pubPEM, 0o644); err != nil {
		_ = os.Remove(files.Private)
		return nil, err
	}
	files.Private = filepath.Clean(files.Private)
	files.Public = filepath.Clean(files.Public)
	return files, nil
}
