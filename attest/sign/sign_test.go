package sign_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/internal/fakesigstore"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

func TestGenerateKeyPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prefix := filepath.Join(dir, "release")
	files, err := sign.GenerateKeyPair(prefix, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(files.Private)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(files.Private)
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "ENCRYPTED SIGSTORE PRIVATE KEY" {
		t.Fatalf("private key PEM type = %v", block)
	}
	// The PEM body is go-securesystemslib's scrypt+secretbox JSON, as
	// cosign writes it, and holds a PKCS #8 ECDSA P-256 key.
	der, err := encrypted.Decrypt(block.Bytes, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		t.Fatal(err)
	}
	if ek, ok := k.(*ecdsa.PrivateKey); !ok || ek.Curve != elliptic.P256() {
		t.Errorf("key is %T, want ECDSA P-256", k)
	}
	var kdf struct {
		KDF struct {
			Name string `json:"Name"`
		} `json:"kdf"`
		Cipher struct {
			Name string `json:"Name"`
		} `json:"cipher"`
	}
	if err := json.Unmarshal(block.Bytes, &kdf); err != nil || kdf.KDF.Name != "scrypt" || kdf.Cipher.Name != "nacl/secretbox" {
		t.Errorf("encrypted body: kdf %q cipher %q err %v", kdf.KDF.Name, kdf.Cipher.Name, err)
	}
	pub, err := sign.LoadPublicKey(files.Public)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadPrivateKey(files.Private, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if !kp.GetPublicKey().(*ecdsa.PublicKey).Equal(pub) {
		t.Error("public key file does not match the private key")
	}
	if _, err := sign.LoadPrivateKey(files.Private, []byte("wrong")); !errors.Is(err, sign.ErrWrongPassword) {
		t.Errorf("wrong password: err = %v", err)
	}
	if _, err := sign.GenerateKeyPair(prefix, nil); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("overwrite: err = %v", err)
	}
	if _, err := sign.LoadPrivateKey(files.Public, nil); err == nil || !strings.Contains(err.Error(), "private key") {
		t.Errorf("public key as private: err = %v", err)
	}
}

func TestParseUnencryptedKey(t *testing.T) {
	t.Parallel()
	priv, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	kp, err := sign.ParsePrivateKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if kp.GetKeyAlgorithm() != "ECDSA" || !strings.Contains(kp.GetSigningAlgorithm().String(), "P384") {
		t.Errorf("algorithm %s %s", kp.GetKeyAlgorithm(), kp.GetSigningAlgorithm())
	}
	if _, err := sign.ParsePrivateKey([]byte("garbage"), nil); err == nil {
		t.Error("garbage accepted")
	}
}

func statement(t *testing.T, digest string) *attest.Statement {
	t.Helper()
	st, err := attest.ValidationStatement(attesttest.Run(false, digest))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func verifyOne(t *testing.T, b []byte, digest string, opts ...verify.Option) *verify.Report {
	t.Helper()
	v, err := verify.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v.Verify(t.Context(), []verify.Entry{{Source: "b", Data: b}}, []verify.Artifact{{Name: "a", SHA256: digest}})
}

func failed(r *verify.Report) []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c.Check+": "+c.Detail)
		}
	}
	return out
}

func TestKeySignWithTimestamp(t *testing.T) {
	t.Parallel()
	fs := fakesigstore.Start(t)
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kp, _ := sign.NewKeypair(priv)
	digest := attesttest.Hex('c')
	s, err := sign.NewKeySigner(kp, sign.WithTimestampURL(fs.TSAURL))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Sign(t.Context(), statement(t, digest))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"rfc3161Timestamps"`)) || !bytes.Contains(b, []byte(sign.BundleMediaType)) {
		t.Fatalf("bundle lacks timestamp or media type: %s", b)
	}
	// With a trusted root that has a TSA, the timestamp is required and checked.
	r := verifyOne(t, b, digest, verify.WithKey(priv.Public(), "k"), verify.WithTrustedRoot(fs.TrustedRoot, "root"))
	if !r.Verified {
		t.Fatalf("failure %s: %v", r.Failure, failed(r))
	}
	// A bundle without timestamp then fails with 10.
	s2, _ := sign.NewKeySigner(kp)
	b2, err := s2.Sign(t.Context(), statement(t, digest))
	if err != nil {
		t.Fatal(err)
	}
	r = verifyOne(t, b2, digest, verify.WithKey(priv.Public(), "k"), verify.WithTrustedRoot(fs.TrustedRoot, "root"))
	if r.Failure != verify.FailureSignature {
		t.Fatalf("untimestamped bundle: failure %s, want signature", r.Failure)
	}
	// Without a trusted root it verifies by key alone, and has no
	// verified signing time.
	r = verifyOne(t, b2, digest, verify.WithKey(priv.Public(), "k"))
	if !r.Verified {
		t.Fatalf("failure %s: %v", r.Failure, failed(r))
	}
	if at := r.Bundles[0].SignedAt; at != nil {
		t.Errorf("a key-signed bundle without a timestamp: signed at %v, want none", at)
	}
}

func TestKeyless(t *testing.T) {
	t.Parallel()
	fs := fakesigstore.Start(t)
	dir := t.TempDir()
	scJSON, err := fs.SigningConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	scPath := filepath.Join(dir, "signing_config.json")
	if err := os.WriteFile(scPath, scJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := sign.LoadSigningConfig(scPath)
	if err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokPath, []byte(fs.Token("release@example.com")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := sign.IDToken(t.Context(), "@"+tokPath, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeylessSigner(sc, tok, sign.WithTrustedRoot(fs.TrustedRoot))
	if err != nil {
		t.Fatal(err)
	}
	digest := attesttest.Hex('c')
	b, err := s.Sign(t.Context(), statement(t, digest))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                   string
		san, sanRE, iss, issRE string
		want                   verify.Failure
	}{
		{name: "exact identity", san: "release@example.com", iss: fakesigstore.Issuer, want: verify.FailureNone},
		{name: "regexp identity", sanRE: `^release@example\.com$`, issRE: `^https://oidc\.fake\.test$`, want: verify.FailureNone},
		{name: "wrong identity", san: "mallory@example.com", iss: fakesigstore.Issuer, want: verify.FailureSignature},
		{name: "wrong issuer", san: "release@example.com", iss: "https://token.actions.githubusercontent.com", want: verify.FailureSignature},
	}
	signedBefore := time.Now()
	for _, tt := range tests {
		r := verifyOne(t, b, digest, verify.WithTrustedRoot(fs.TrustedRoot, "root"), verify.WithCertificateIdentity(tt.san, tt.sanRE, tt.iss, tt.issRE))
		if r.Failure != tt.want {
			t.Errorf("%s: failure %s, want %s: %v", tt.name, r.Failure, tt.want, failed(r))
		}
		// The RFC 3161 timestamp is the bundle's verified signing time.
		if at := r.Bundles[0].SignedAt; tt.want == verify.FailureNone && (at == nil || at.After(signedBefore.Add(time.Minute)) || at.Before(signedBefore.Add(-5*time.Minute))) {
			t.Errorf("%s: signed at %v, want the timestamp, just before %v", tt.name, at, signedBefore)
		}
	}
	// Another Sigstore's trusted root does not verify it.
	other := fakesigstore.Start(t)
	r := verifyOne(t, b, digest, verify.WithTrustedRoot(other.TrustedRoot, "other"), verify.WithCertificateIdentity("release@example.com", "", fakesigstore.Issuer, ""))
	if r.Failure != verify.FailureSignature {
		t.Errorf("foreign root: failure %s, want signature", r.Failure)
	}
	// A token Fulcio cannot verify is refused at signing.
	bad, err := sign.NewKeylessSigner(sc, other.Token("release@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Sign(t.Context(), statement(t, digest)); err == nil {
		t.Error("signing with a foreign token succeeded")
	}
}

func TestIDTokenGitHubActions(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "bearer req-token" || r.URL.Query().Get("audience") != "sigstore" {
			http.Error(w, "denied", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"value":"the-oidc-token"}`))
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL + "/token?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "req-token"}
	tok, err := sign.IDToken(t.Context(), "", func(k string) string { return env[k] }, srv.Client())
	if err != nil || tok != "the-oidc-token" {
		t.Fatalf("token %q err %v", tok, err)
	}
	if _, err := sign.IDToken(context.Background(), "", func(string) string { return "" }, nil); err == nil || !strings.Contains(err.Error(), "hint:") {
		t.Errorf("no token: err = %v", err)
	}
	if tok, _ := sign.IDToken(context.Background(), "literal", nil, nil); tok != "literal" {
		t.Errorf("literal token = %q", tok)
	}
}

func TestAppendJSONL(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), sign.JSONLName)
	if err := sign.AppendJSONL(p, [][]byte{[]byte("{\n \"a\": 1\n}")}); err != nil {
		t.Fatal(err)
	}
	if err := sign.AppendJSONL(p, [][]byte{[]byte(`{"b":2}`)}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("content %q", b)
	}
	if err := sign.AppendJSONL(p, [][]byte{[]byte(`{`)}); err == nil {
		t.Error("invalid JSON appended")
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
}
