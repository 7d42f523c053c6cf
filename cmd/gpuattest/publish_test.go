package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
)

// cli runs gpuattest with args in-process and returns its exit code and
// output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// fixtureRun writes a signed fixture run (key without password) and
// returns the run directory and the public key file.
func fixtureRun(t *testing.T, files []runfixture.File) (string, string) {
	t.Helper()
	dir := t.TempDir()
	keys, err := sign.GenerateKeyPair(filepath.Join(dir, "release"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadPrivateKey(keys.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	if _, err := runfixture.Write(t.Context(), filepath.Join(dir, "root"), runDir, files, s); err != nil {
		t.Fatal(err)
	}
	return runDir, keys.Public
}

var digestLine = regexp.MustCompile(`(?m)^(\S+@sha256:[0-9a-f]{64})$`)

// push pushes runDir to ref and returns REPO@sha256:<hex>.
func push(t *testing.T, runDir, ref string) string {
	t.Helper()
	code, out, errOut := cli(t, "push", runDir, ref)
	if code != 0 {
		t.Fatalf("push %s: exit %d\n%s%s", ref, code, out, errOut)
	}
	m := digestLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("push printed no digest:\n%s", out)
	}
	return m[1]
}

// TestPublishTamper changes the registry's storage under a pushed release
// (publish_interop.txt is the untampered publish): a layer, then a
// bundle, in docker-registry's blobs.
func TestPublishTamper(t *testing.T) {
	t.Parallel()
	runDir, pub := fixtureRun(t, []runfixture.File{{Name: "build/a.fatbin", Size: 70000}, {Name: "build/b.fatbin", Size: 1234}})
	tamper(t, registrytest.StartDocker(t), runDir, pub)
}

// tamper changes a layer and then a bundle in docker-registry's storage:
// verify exits 11 and 10, pull writes nothing.
func tamper(t *testing.T, d *registrytest.Docker, runDir, pub string) {
	ref := d.Host + "/tampered:v1"
	byDigest := push(t, runDir, ref)
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	raw, err := os.ReadFile(d.BlobPath(byDigest[strings.Index(byDigest, "@")+1:]))
	if err != nil || json.Unmarshal(raw, &m) != nil || len(m.Layers) == 0 {
		t.Fatalf("reading the pushed manifest: %v", err)
	}
	bundles, err := os.ReadFile(filepath.Join(runDir, "attestations.intoto.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := bytes.SplitN(bundles, []byte("\n"), 2)[0]
	for _, tt := range []struct {
		what, blob string
		want       int
	}{{"layer", m.Layers[0].Digest, 11}, {"bundle", "sha256:" + sha256Hex(first), 10}} {
		p := d.BlobPath(tt.blob)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s blob: %v", tt.what, err)
		}
		b[len(b)/2] ^= 0x20
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, _ := cli(t, "verify", ref, "--key", pub, "--policy", "builtin:cpu-tier"); code != tt.want {
			t.Errorf("verify with a changed %s: exit %d, want %d\n%s", tt.what, code, tt.want, out)
		}
		parent := t.TempDir()
		code, out, _ := cli(t, "pull", ref, "--key", pub, "--policy", "builtin:cpu-tier", "--out", filepath.Join(parent, "out"), "--to", "oci-layout:"+filepath.Join(parent, "layout"))
		if left, _ := os.ReadDir(parent); code != tt.want || len(left) != 0 || !strings.Contains(out, "Nothing was written") {
			t.Errorf("pull with a changed %s: exit %d, want %d; left %v\n%s", tt.what, code, tt.want, left, out)
		}
		b[len(b)/2] ^= 0x20
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
