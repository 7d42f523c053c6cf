// Package fakesigstore runs a private Sigstore for tests: a Fulcio CA and
// an RFC 3161 timestamp authority as httptest servers speaking the real
// protocols (Fulcio's /api/v2/signingCert, application/timestamp-query),
// an OIDC issuer that mints ES256 tokens Fulcio checks, and the matching
// trusted root and signing config v0.2. Certificates come from
// sigstore-go's pkg/testing/ca helpers. There is no Rekor: the trusted
// root lists no transparency log, so verification relies on the signed
// timestamps.
package fakesigstore

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/digitorus/timestamp"
	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Issuer is the OIDC issuer URL of the tokens Token mints.
const Issuer = "https://oidc.fake.test"

// Sigstore is a running fake Sigstore.
type Sigstore struct {
	// FulcioURL and TSAURL are the servers' URLs (TSAURL is the full
	// timestamp endpoint).
	FulcioURL, TSAURL string
	// TrustedRoot trusts this Fulcio and TSA.
	TrustedRoot *root.TrustedRoot

	rootCert, fulcioCert *x509.Certificate
	fulcioKey            *ecdsa.PrivateKey
	tsaLeaf              *x509.Certificate
	tsaKey               *ecdsa.PrivateKey
	oidcKey              *ecdsa.PrivateKey
	serial               int64
}

// Start starts the servers; they stop when t ends.
func Start(t testing.TB) *Sigstore {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	fulcio := httptest.NewServer(http.HandlerFunc(s.serveFulcio))
	tsa := httptest.NewServer(http.HandlerFunc(s.serveTSA))
	t.Cleanup(fulcio.Close)
	t.Cleanup(tsa.Close)
	s.FulcioURL, s.TSAURL = fulcio.URL, tsa.URL+"/api/v1/timestamp"
	return s
}

func start() (*Sigstore, error) {
	s := &Sigstore{serial: 10}
	var err error
	var rootKey *ecdsa.PrivateKey
	if s.rootCert, rootKey, err = ca.GenerateRootCa(); err != nil {
		return nil, err
	}
	if s.fulcioCert, s.fulcioKey, err = ca.GenerateFulcioIntermediate(s.rootCert, rootKey); err != nil {
		return nil, err
	}
	tsaInter, tsaInterKey, err := ca.GenerateTSAIntermediate(s.rootCert, rootKey)
	if err != nil {
		return nil, err
	}
	if s.tsaKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	if s.tsaLeaf, err = ca.GenerateTSALeafCert(time.Now().Add(-time.Minute), s.tsaKey, tsaInter, tsaInterKey); err != nil {
		return nil, err
	}
	if s.oidcKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	start := time.Now().Add(-time.Hour)
	s.TrustedRoot, err = root.NewTrustedRoot(root.TrustedRootMediaType01,
		[]root.CertificateAuthority{&root.FulcioCertificateAuthority{Root: s.rootCert, Intermediates: []*x509.Certificate{s.fulcioCert}, ValidityPeriodStart: start, URI: "https://fulcio.fake.test"}},
		nil,
		[]root.TimestampingAuthority{&root.SigstoreTimestampingAuthority{Root: s.rootCert, Intermediates: []*x509.Certificate{tsaInter}, Leaf: s.tsaLeaf, ValidityPeriodStart: start, URI: "https://tsa.fake.test"}},
		nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// TrustedRootJSON returns the trusted root as JSON.
func (s *Sigstore) TrustedRootJSON() ([]byte, error) { return s.TrustedRoot.MarshalJSON() }

// SigningConfigJSON returns a signing config v0.2 naming this Fulcio and
// TSA, with no Rekor.
func (s *Sigstore) SigningConfigJSON() ([]byte, error) {
	any1 := root.ServiceConfiguration{Selector: prototrustroot.ServiceSelector_ANY}
	sc, err := root.NewSigningConfig(root.SigningConfigMediaType02,
		[]root.Service{{URL: s.FulcioURL, MajorAPIVersion: 1, ValidityPeriodStart: time.Now().Add(-time.Hour)}},
		nil, nil, root.ServiceConfiguration{Selector: prototrustroot.ServiceSelector_ANY},
		[]root.Service{{URL: s.TSAURL, MajorAPIVersion: 1, ValidityPeriodStart: time.Now().Add(-time.Hour)}},
		any1)
	if err != nil {
		return nil, err
	}
	return sc.MarshalJSON()
}

// Token mints an ES256 OIDC token for email, issued by Issuer.
func (s *Sigstore) Token(email string) string {
	enc := base64.RawURLEncoding
	hdr := enc.EncodeToString([]byte(`{"alg":"ES256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{
		"iss": Issuer, "sub": email, "email": email, "email_verified": true,
		"aud": "sigstore", "exp": time.Now().Add(10 * time.Minute).Unix(), "iat": time.Now().Unix(),
	})
	body := hdr + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(body))
	r, sv, err := ecdsa.Sign(rand.Reader, s.oidcKey, sum[:])
	if err != nil {
		panic(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return body + "." + enc.EncodeToString(sig)
}

// checkToken verifies a token minted by Token and returns its claims.
func (s *Sigstore) checkToken(tok string) (map[string]any, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, errors.New("malformed token")
	}
	enc := base64.RawURLEncoding
	sig, err := enc.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return nil, errors.New("malformed token signature")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(&s.oidcKey.PublicKey, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, errors.New("token signature invalid")
	}
	b, err := enc.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		return nil, err
	}
	if exp, _ := claims["exp"].(float64); time.Unix(int64(exp), 0).Before(time.Now()) {
		return nil, errors.New("token expired")
	}
	return claims, nil
}

func (s *Sigstore) serveFulcio(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v2/signingCert" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	claims, err := s.checkToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var req struct {
		PublicKeyRequest struct {
			PublicKey struct {
				Content string `json:"content"`
			} `json:"publicKey"`
			ProofOfPossession string `json:"proofOfPossession"`
		} `json:"publicKeyRequest"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(req.PublicKeyRequest.PublicKey.Content))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	email, _ := claims["email"].(string)
	pop, err := base64.StdEncoding.DecodeString(req.PublicKeyRequest.ProofOfPossession)
	ecPub, ok := pub.(*ecdsa.PublicKey)
	sum := sha256.Sum256([]byte(email))
	if err != nil || !ok || !ecdsa.VerifyASN1(ecPub, sum[:], pop) {
		http.Error(w, "proof of possession failed", http.StatusBadRequest)
		return
	}
	issuerV2, _ := asn1.MarshalWithParams(Issuer, "utf8")
	s.serial++
	tmpl := &x509.Certificate{
		SerialNumber:   big.NewInt(s.serial),
		EmailAddresses: []string{email},
		NotBefore:      time.Now().Add(-time.Minute),
		NotAfter:       time.Now().Add(10 * time.Minute),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}, Value: []byte(Issuer)},
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: issuerV2},
		},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.fulcioCert, pub, s.fulcioKey)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pemOf := func(b []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b})) }
	resp := map[string]any{"signedCertificateEmbeddedSct": map[string]any{"chain": map[string]any{
		"certificates": []string{pemOf(der), pemOf(s.fulcioCert.Raw), pemOf(s.rootCert.Raw)},
	}}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Sigstore) serveTSA(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := timestamp.ParseRequest(body)
	if err != nil {
		http.Error(w, fmt.Sprintf("bad timestamp request: %v", err), http.StatusBadRequest)
		return
	}
	ts := timestamp.Timestamp{
		HashAlgorithm: req.HashAlgorithm,
		HashedMessage: req.HashedMessage,
		Nonce:         req.Nonce,
		Time:          time.Now(),
		Policy:        asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 2},
	}
	resp, err := ts.CreateResponseWithOpts(s.tsaLeaf, s.tsaKey, crypto.SHA256)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	_, _ = io.Copy(w, bytes.NewReader(resp))
}
