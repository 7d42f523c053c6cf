package main

import (
	"bytes"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
)

// TestDispatchBesideOrdinaryRelease (issue 30, item 12): a registry
// writer who adds a fleet dispatch to an ordinary release, signed by
// another key or the owner's dispatch of another release, leaves it an
// ordinary release: verify REF --policy judges it (exit 0, the dispatch
// left out, said so) and history draws it. Only a dispatch the owner
// signed over this release's manifest makes it a fleet release, whose
// checks replace the policy (exit 2 with --policy).
func TestDispatchBesideOrdinaryRelease(t *testing.T) {
	t.Parallel()
	host := registrytest.StartInProcess(t, nil)
	runDir, pub := fixtureRun(t, []runfixture.File{{Name: "build/a.fatbin", Size: 2048}})
	att := filepath.Join(runDir, "attestations.intoto.jsonl")
	data, err := os.ReadFile(att)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	st, err := sign.UnverifiedStatement(line)
	if err != nil {
		t.Fatal(err)
	}
	ownerKey := filepath.Join(filepath.Dir(pub), "release.key")
	stranger, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "stranger"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// another is the subjects with the release manifest of another
	// release.
	var another []attest.Subject
	for _, s := range st.Subject {
		if s.Name == attest.ManifestSubjectName {
			s = attest.Subject{Name: s.Name, Digest: map[string]string{"sha256": strings.Repeat("5a", 32)}}
		}
		another = append(another, s)
	}
	tests := []struct {
		name     string
		key      string
		subjects []attest.Subject
		fleet    bool
	}{
		{name: "another key's dispatch of this release", key: stranger.Private, subjects: st.Subject},
		{name: "the owner's dispatch of another release", key: ownerKey, subjects: another},
		{name: "the owner's dispatch of this release", key: ownerKey, subjects: st.Subject, fleet: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, err := sign.LoadPrivateKey(tt.key, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := sign.NewKeySigner(kp)
			if err != nil {
				t.Fatal(err)
			}
			d := &dispatch.Dispatch{ID: "planted", Targets: []string{"sm_80"}, Jobs: []dispatch.Job{{Name: "a100-0", Class: "a100", Nonce: "n", Targets: []string{"sm_80"}}}}
			ds, err := d.Statement(tt.subjects)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Sign(t.Context(), ds)
			if err != nil {
				t.Fatal(err)
			}
			// The release as the owner pushed it, then the planted dispatch
			// added as one more referrer, as a registry writer can.
			repo := host + "/k" + string(rune('a'+i))
			byDigest := push(t, runDir, repo+":v1")
			files := filepath.Join(t.TempDir(), "files")
			if code, out, errOut := cli(t, "pull", byDigest, "--key", pub, "--policy", "builtin:cpu-tier", "--out", files); code != 0 {
				t.Fatalf("pull: exit %d\n%s%s", code, out, errOut)
			}
			var fs []oci.File
			err = filepath.WalkDir(files, func(p string, e iofs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(files, p)
				fs = append(fs, oci.File{Name: filepath.ToSlash(rel), Path: p, SHA256: sha256Hex(b), Size: int64(len(b))})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			rel, err := oci.NewRelease(fs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := oci.Push(t.Context(), byDigest, rel, []oci.Bundle{{Data: b, PredicateType: dispatch.PredicateType}}); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := cli(t, "verify", repo+":v1", "--key", pub, "--policy", "builtin:cpu-tier")
			if tt.fleet {
				if code != exitUsage || !strings.Contains(errOut, "the bundles hold a fleet dispatch") {
					t.Errorf("verify --policy of a release the owner dispatched: exit %d, want %d\n%s%s", code, exitUsage, out, errOut)
				}
				return
			}
			if code != 0 || !strings.Contains(out, "left out, unverified: predicate type "+dispatch.PredicateType) || !strings.Contains(out, "Verified OK") {
				t.Errorf("verify --policy: exit %d, want 0 with the dispatch left out\n%s%s", code, out, errOut)
			}
			code, out, errOut = cli(t, "history", repo, "--key", pub, "--policy", "builtin:cpu-tier", "--no-bundle-cache")
			if code != 0 || !strings.Contains(out, "1 release(s) verified, 0 left out") {
				t.Errorf("history: exit %d, want the release drawn\n%s%s", code, out, errOut)
			}
		})
	}
}
