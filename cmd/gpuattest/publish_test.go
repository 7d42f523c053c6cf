package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/runfixture"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// cli runs gpuattest with args in-process and returns its exit code and
// output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// tool runs an external tool (cosign, oras) with a private HOME and a
// time limit.
func tool(t *testing.T, dir, path string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TUF_ROOT=" + filepath.Join(home, ".sigstore"), "DOCKER_CONFIG=" + home}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
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

// TestPublishInterop: a signed run pushed to docker-registry (tag schema)
// and to the in-process registry (referrers API); cosign
// verify-attestation checks the manifest digest, oras discover lists our
// bundles and oras pull gets the same bytes; tampering with the storage
// is caught and pull writes nothing.
func TestPublishInterop(t *testing.T) {
	t.Parallel()
	cosign := testenv.RequireGoTool(t, "cosign")
	oras := testenv.RequireGoTool(t, "oras")
	runDir, pub := fixtureRun(t, []runfixture.File{{Name: "build/a.fatbin", Size: 70000}, {Name: "build/b.fatbin", Size: 1234}})
	docker := registrytest.StartDocker(t)
	for _, host := range []string{docker.Host, registrytest.StartInProcess(t, nil)} {
		ref := host + "/kernels:v1"
		byDigest := push(t, runDir, ref)
		if again := push(t, runDir, ref); again != byDigest {
			t.Errorf("second push printed %s, want %s", again, byDigest)
		}
		// The fixture run used no GPU: the CPU tier is asked for by name.
		if code, out, errOut := cli(t, "verify", ref, "--key", pub, "--policy", "builtin:cpu-tier"); code != 0 || !strings.Contains(out, "Verified OK") {
			t.Fatalf("verify %s: exit %d\n%s%s", ref, code, out, errOut)
		}
		for _, pt := range []string{attest.ValidationPredicateType, attest.ProvenancePredicateType} {
			out, err := tool(t, t.TempDir(), cosign, "verify-attestation", "--new-bundle-format", "--key", pub, "--type", pt,
				"--insecure-ignore-tlog", "--allow-http-registry", byDigest)
			if err != nil || !strings.Contains(out, "Verified") && !strings.Contains(out, "verified") {
				t.Errorf("cosign verify-attestation --type %s %s: %v\n%s", pt, byDigest, err, out)
			}
		}
		out, err := tool(t, t.TempDir(), oras, "discover", "--plain-http", "--format", "json", byDigest)
		// (go-containerregistry's registry lists the config's media type
		// as a referrer's artifactType; the annotations are ours.)
		if err != nil || strings.Count(out, `"`+oci.AnnotationPredicateType+`"`) != 2 || host == docker.Host && strings.Count(out, oci.BundleMediaType) != 2 {
			t.Errorf("oras discover %s: %v\n%s", byDigest, err, out)
		}
		pulled := t.TempDir()
		if out, err := tool(t, pulled, oras, "pull", "--plain-http", byDigest); err != nil {
			t.Errorf("oras pull %s: %v\n%s", byDigest, err, out)
		}
		for _, name := range []string{"build/a.fatbin", "build/b.fatbin"} {
			want, _ := os.ReadFile(filepath.Join(runDir, "steps/kernels/outputs", name))
			got, err := os.ReadFile(filepath.Join(pulled, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("oras pull: %s differs from the run's copy (%v)", name, err)
			}
		}
	}
	tamper(t, docker, runDir, pub)
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
