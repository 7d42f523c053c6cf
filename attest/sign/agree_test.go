package sign_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"
)

// keypair makes an ECDSA P-256 key pair (without the slow encryption).
func keypair(t *testing.T) (*ecdsa.PrivateKey, *sign.Keypair) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, kp
}

// TestSignAgreesWithVerify: sign refuses, with the field path, every
// statement verify would refuse; and verify reports such a statement,
// validly signed by other means, as a statement problem (a policy
// failure), not as a bad signature.
func TestSignAgreesWithVerify(t *testing.T) {
	t.Parallel()
	priv, kp := keypair(t)
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	digest := attesttest.Hex('c')
	base := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a","digest":{"sha256":"` + digest + `"}}],"predicateType":"https://example.com/p/v1","predicate":{"result":"passed"}}`
	tests := []struct{ name, payload, wantPath string }{
		{"unknown field", strings.Replace(base, `"predicate":`, `"comment":"x","predicate":`, 1), "comment: unknown field"},
		{"case variant", strings.Replace(base, `"subject"`, `"Subject"`, 1), "Subject: unknown field"},
		{"subject field case variant", strings.Replace(base, `"name":"a"`, `"Name":"a"`, 1), "subject[0].Name: unknown field"},
		{"duplicate key", strings.Replace(base, `{"result":"passed"}`, `{"result":"failed","result":"passed"}`, 1), `predicate: key "result" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := s.SignPayload(t.Context(), []byte(tt.payload))
			if err == nil || !strings.Contains(err.Error(), tt.wantPath) {
				t.Fatalf("sign: err = %v, want %q", err, tt.wantPath)
			}
			// Signed anyway, by sigstore-go directly.
			pb, err := sgsign.Bundle(&sgsign.DSSEData{Data: []byte(tt.payload), PayloadType: attest.PayloadType}, kp, sgsign.BundleOptions{Context: t.Context()})
			if err != nil {
				t.Fatal(err)
			}
			b, err := protojson.Marshal(pb)
			if err != nil {
				t.Fatal(err)
			}
			r := verifyOne(t, b, digest, verify.WithKey(priv.Public(), "k"), verify.WithPredicateType("https://example.com/p/v1"))
			if r.Failure != verify.FailurePolicy {
				t.Fatalf("verify: failure %s, want policy: %v", r.Failure, failed(r))
			}
			found := false
			for _, c := range r.Checks {
				if c.Check == verify.CheckStatement && strings.Contains(c.Detail, tt.wantPath) {
					found = true
				}
			}
			if !found {
				t.Errorf("no statement check naming %q: %v", tt.wantPath, failed(r))
			}
		})
	}
}

// TestSignSizeLimit: sign refuses a statement larger than verify accepts.
func TestSignSizeLimit(t *testing.T) {
	t.Parallel()
	_, kp := keypair(t)
	payload, err := statement(t, attesttest.Hex('c')).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp, sign.WithMaxStatementSize(int64(len(payload)-1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignPayload(t.Context(), payload); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("over the limit: err = %v", err)
	}
	s, err = sign.NewKeySigner(kp, sign.WithMaxStatementSize(int64(len(payload))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignPayload(t.Context(), payload); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}
