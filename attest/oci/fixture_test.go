package oci_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// Predicate types of the fixture's two statements.
const (
	typeA = "https://gpuattest.dev/test/oci-a/v1"
	typeB = "https://gpuattest.dev/test/oci-b/v1"
)

// fixture is a signed release: files on disk, their Release, and two
// bundles (predicate types typeA and typeB) whose statements name every
// file and the manifest.
type fixture struct {
	dir     string
	files   []oci.File
	content map[string][]byte
	rel     *oci.Release
	bundles []oci.Bundle
	keys    *sign.KeyPairFiles
}

// newFixture writes n files of size bytes (random) named kernels/k<i>.bin
// and signs the release with a fresh key.
func newFixture(t testing.TB, n, size int) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), content: map[string][]byte{}}
	for i := range n {
		name := fmt.Sprintf("kernels/k%d.bin", i)
		b := make([]byte, size)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(f.dir, "files", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		f.files = append(f.files, oci.File{Name: name, Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(size)})
		f.content[name] = b
	}
	var err error
	if f.rel, err = oci.NewRelease(f.files); err != nil {
		t.Fatal(err)
	}
	f.keys, err = sign.GenerateKeyPair(filepath.Join(f.dir, "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.bundles = f.sign(t, f.subjects())
	return f
}

// subjects are the files and the release manifest.
func (f *fixture) subjects() []attest.FileDigest {
	var subj []attest.FileDigest
	for _, fl := range f.files {
		subj = append(subj, attest.FileDigest{Path: fl.Name, SHA256: fl.SHA256})
	}
	return append(subj, attest.FileDigest{Path: oci.ManifestSubjectName, SHA256: f.rel.Digest()[len("sha256:"):]})
}

// sign signs one statement of each predicate type over subj.
func (f *fixture) sign(t testing.TB, subj []attest.FileDigest) []oci.Bundle {
	t.Helper()
	kp, err := sign.LoadPrivateKey(f.keys.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	var out []oci.Bundle
	for _, pt := range []string{typeA, typeB} {
		st, err := attest.NewStatement(subj, pt, map[string]any{"result": "passed"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Sign(t.Context(), st)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, oci.Bundle{Data: b, PredicateType: pt})
	}
	return out
}

// verifier verifies typeA bundles with the fixture's key.
func (f *fixture) verifier(t testing.TB) *verify.Verifier {
	t.Helper()
	pub, err := sign.LoadPublicKey(f.keys.Public)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.WithKey(pub, f.keys.Public), verify.WithPredicateType(typeA))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// failed lists a report's failed checks.
func failed(r *verify.Report) []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c.Check+" "+c.Target+": "+c.Detail)
		}
	}
	return out
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
