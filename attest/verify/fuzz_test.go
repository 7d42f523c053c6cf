package verify_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/sigstore/sigstore-go/pkg/bundle"
)

// FuzzVerifyBundle feeds mutated bundle bytes to the verifier. It must
// never panic, always give a documented failure, and never verify a
// bundle whose signed statement differs from the original one (a valid
// re-encoding of the same statement, e.g. other JSON whitespace, may
// verify; a different statement may not).
func FuzzVerifyBundle(f *testing.F) {
	dir := f.TempDir()
	kp, pub := newKey(f, dir, "fuzz")
	art := writeArtifact(f, dir, "kernels.fatbin", "fatbin bytes")
	good := signRun(f, kp, attesttest.Run(false, art.SHA256))
	origPayload := payloadOf(good)
	if origPayload == nil {
		f.Fatal("seed bundle has no payload")
	}
	pubKey := mustPub(f, pub)
	v, err := verify.New(verify.WithKey(pubKey, pub))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(append(append(bytes.Clone(good), '\n'), good...))
	f.Add(editPayload(f, good, func(p []byte) []byte {
		return bytes.Replace(p, []byte(`"simulated":false`), []byte(`"simulated":true`), 1)
	}))
	f.Add(bytes.Replace(good, []byte(`"publicKey"`), []byte(`"x509CertificateChain"`), 1))
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := verify.ParseBundles("fuzz", data)
		if err != nil {
			return
		}
		r := v.Verify(t.Context(), entries, []verify.Artifact{art})
		switch r.Failure {
		case verify.FailureNone, verify.FailureError, verify.FailureSignature, verify.FailureSubject, verify.FailurePolicy:
		default:
			t.Fatalf("undocumented failure %d", r.Failure)
		}
		if r.Verified != (r.Failure == verify.FailureNone) {
			t.Fatalf("verified=%v with failure %s", r.Verified, r.Failure)
		}
		if !r.Verified {
			return
		}
		for _, e := range entries {
			if p := payloadOf(e.Data); !bytes.Equal(p, origPayload) {
				t.Fatalf("a bundle with a different statement verified:\n%s", e.Data)
			}
		}
	})
}

// payloadOf returns the DSSE payload of a bundle, nil when it has none.
func payloadOf(b []byte) []byte {
	var bb bundle.Bundle
	if err := bb.UnmarshalJSON(b); err != nil {
		// Not a bundle sigstore-go can read; fall back to the raw field.
		var m struct {
			DSSE struct {
				Payload string `json:"payload"`
			} `json:"dsseEnvelope"`
		}
		if json.Unmarshal(b, &m) != nil {
			return nil
		}
		p, _ := base64.StdEncoding.DecodeString(m.DSSE.Payload)
		return p
	}
	env, err := bb.Envelope()
	if err != nil {
		return nil
	}
	p, err := env.RawEnvelope().DecodeB64Payload()
	if err != nil {
		return nil
	}
	return p
}
