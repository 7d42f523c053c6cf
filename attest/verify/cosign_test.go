package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/internal/attesttest"
	"github.com/gpuattest/gpuattest/attest/internal/fakesigstore"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/sigstore/sigstore-go/pkg/root"
)

// cosignPath finds cosign in PATH or $GOPATH/bin (where .ci/cosign
// installs it); a missing cosign fails the test in CI and skips it
// elsewhere.
func cosignPath(t *testing.T) string {
	t.Helper()
	return testenv.RequireGoTool(t, "cosign")
}

// cosign runs cosign with a private HOME, no network credentials, a
// password, and a time limit; it returns combined output.
func cosign(t *testing.T, dir, password string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cosignPath(t), args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "COSIGN_PASSWORD=" + password, "TUF_ROOT=" + filepath.Join(home, ".sigstore")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// noTlogSigningConfig is a signing config v0.2 naming no service: cosign
// signs with the key alone and uploads nothing.
const noTlogSigningConfig = `{"mediaType":"application/vnd.dev.sigstore.signingconfig.v0.2+json"}`

func TestCosignInterop(t *testing.T) {
	t.Parallel()
	cosignPath(t)
	dir := t.TempDir()
	art := writeArtifact(t, dir, "kernels.fatbin", "fatbin bytes for cosign")
	run := attesttest.Run(false, art.SHA256)
	run.Artifacts[0].Path = "kernels.fatbin"
	st, err := attest.ValidationStatement(run)
	if err != nil {
		t.Fatal(err)
	}
	artPath := filepath.Join(dir, "kernels.fatbin")

	// gpuattest key generate's key, used by both tools.
	ours, err := sign.GenerateKeyPair(filepath.Join(dir, "ours"), []byte("pw1"))
	if err != nil {
		t.Fatal(err)
	}
	// cosign generate-key-pair's key, used by both tools.
	if out, err := cosign(t, dir, "pw2", "generate-key-pair", "--output-key-prefix", "theirs"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	theirs := &sign.KeyPairFiles{Private: filepath.Join(dir, "theirs.key"), Public: filepath.Join(dir, "theirs.pub")}

	gpuattestVerify := func(t *testing.T, bundlePath, pubPath string) *verify.Report {
		t.Helper()
		b, err := os.ReadFile(bundlePath)
		if err != nil {
			t.Fatal(err)
		}
		return (&fixture{pubPath: pubPath}).verify(t, b, []verify.Artifact{art})
	}
	cosignVerify := func(t *testing.T, bundlePath, pubPath string) (string, error) {
		t.Helper()
		return cosign(t, dir, "", "verify-blob-attestation", "--key", pubPath, "--bundle", bundlePath,
			"--insecure-ignore-tlog", "--type", attest.ValidationPredicateType, artPath)
	}

	for _, k := range []struct {
		name     string
		files    *sign.KeyPairFiles
		password string
	}{{"gpuattest key", ours, "pw1"}, {"cosign key", theirs, "pw2"}} {
		t.Run("gpuattest signs with "+k.name+", cosign verifies", func(t *testing.T) {
			kp, err := sign.LoadPrivateKey(k.files.Private, []byte(k.password))
			if err != nil {
				t.Fatal(err)
			}
			b := signStatement(t, kp, st)
			bp := filepath.Join(dir, "ours-"+strings.ReplaceAll(k.name, " ", "-")+".json")
			if err := sign.WriteBundle(bp, b); err != nil {
				t.Fatal(err)
			}
			out, err := cosignVerify(t, bp, k.files.Public)
			if err != nil || !strings.Contains(out, "Verified OK") {
				t.Fatalf("cosign verify-blob-attestation: %v\n%s", err, out)
			}
			// cosign rejects it under the other key, as we do.
			other := ours.Public
			if k.files == ours {
				other = theirs.Public
			}
			if out, err := cosignVerify(t, bp, other); err == nil || strings.Contains(out, "Verified OK") {
				t.Fatalf("cosign verified under the wrong key:\n%s", out)
			}
			if r := gpuattestVerify(t, bp, k.files.Public); !r.Verified {
				t.Fatalf("gpuattest verify: failure %s: %v", r.Failure, failedChecks(r))
			}
		})
		t.Run("cosign attest-blob signs with "+k.name+", gpuattest verifies", func(t *testing.T) {
			pred := filepath.Join(dir, "predicate-"+strings.ReplaceAll(k.name, " ", "-")+".json")
			if err := os.WriteFile(pred, st.Predicate, 0o644); err != nil {
				t.Fatal(err)
			}
			sc := filepath.Join(dir, "signing-config.json")
			if err := os.WriteFile(sc, []byte(noTlogSigningConfig), 0o644); err != nil {
				t.Fatal(err)
			}
			bp := filepath.Join(dir, "cosign-"+strings.ReplaceAll(k.name, " ", "-")+".json")
			out, err := cosign(t, dir, k.password, "attest-blob", "--key", k.files.Private, "--predicate", pred,
				"--type", attest.ValidationPredicateType, "--bundle", bp, "--signing-config", sc, "--yes", artPath)
			if err != nil {
				t.Fatalf("cosign attest-blob: %v\n%s", err, out)
			}
			r := gpuattestVerify(t, bp, k.files.Public)
			if !r.Verified {
				t.Fatalf("gpuattest verify of cosign's bundle: failure %s: %v", r.Failure, failedChecks(r))
			}
			// Tampering with cosign's bundle is caught too.
			b, _ := os.ReadFile(bp)
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			tampered := editPayload(t, b, func(p []byte) []byte {
				return bytes.Replace(p, []byte(`"simulated":false`), []byte(`"simulated":true `), 1)
			})
			tp := bp + ".tampered"
			if err := os.WriteFile(tp, tampered, 0o644); err != nil {
				t.Fatal(err)
			}
			if r := gpuattestVerify(t, tp, k.files.Public); r.Failure != verify.FailureSignature {
				t.Fatalf("tampered cosign bundle: failure %s, want signature", r.Failure)
			}
		})
	}
}

// TestCosignVerifiesKeyless: a keyless bundle (Fulcio certificate and
// RFC 3161 timestamp from the fake Sigstore) verifies with cosign against
// the same trusted root, and with gpuattest.
func TestCosignVerifiesKeyless(t *testing.T) {
	t.Parallel()
	cosignPath(t)
	fs := fakesigstore.Start(t)
	dir := t.TempDir()
	art := writeArtifact(t, dir, "kernels.fatbin", "keyless fatbin")
	st, err := attest.ValidationStatement(attesttest.Run(false, art.SHA256))
	if err != nil {
		t.Fatal(err)
	}
	scJSON, err := fs.SigningConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	scPath := filepath.Join(dir, "signing_config.json")
	trJSON, err := fs.TrustedRootJSON()
	if err != nil {
		t.Fatal(err)
	}
	trPath := filepath.Join(dir, "trusted_root.json")
	for p, b := range map[string][]byte{scPath: scJSON, trPath: trJSON} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := sign.LoadSigningConfig(scPath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeylessSigner(sc, fs.Token("release@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Sign(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	bp := filepath.Join(dir, "keyless.json")
	if err := sign.WriteBundle(bp, b); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify-blob-attestation", "--bundle", bp, "--trusted-root", trPath,
		"--certificate-oidc-issuer", fakesigstore.Issuer, "--insecure-ignore-tlog", "--insecure-ignore-sct",
		"--use-signed-timestamps", "--type", attest.ValidationPredicateType}
	out, err := cosign(t, dir, "", append(args, "--certificate-identity", "release@example.com", filepath.Join(dir, "kernels.fatbin"))...)
	if err != nil || !strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign verify-blob-attestation (keyless): %v\n%s", err, out)
	}
	if out, err := cosign(t, dir, "", append(args, "--certificate-identity", "mallory@example.com", filepath.Join(dir, "kernels.fatbin"))...); err == nil {
		t.Fatalf("cosign accepted the wrong identity:\n%s", out)
	}
	tr, err := root.NewTrustedRootFromPath(trPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.WithTrustedRoot(tr, trPath), verify.WithCertificateIdentity("release@example.com", "", fakesigstore.Issuer, ""))
	if err != nil {
		t.Fatal(err)
	}
	if r := v.Verify(t.Context(), []verify.Entry{{Source: bp, Data: b}}, []verify.Artifact{art}); !r.Verified {
		t.Fatalf("gpuattest verify (keyless): failure %s: %v", r.Failure, failedChecks(r))
	}
}
