package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/runfixture"
)

// rebuild and verify --vsa-out refuse missing or contradictory flags as
// usage errors, before reading any bundle.
func TestRebuildUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rebuild", "--bundle", "b.jsonl", "--key", "k.pub"}, "--source DIR is required"},
		{[]string{"rebuild", "--source", "."}, "--bundle FILE is required"},
		{[]string{"rebuild", "--bundle", "b.jsonl", "--key", "k.pub", "--source", ".", "--vsa-out", "v.json"}, "--vsa-out needs --sign-key"},
		{[]string{"rebuild", "--bundle", "b.jsonl", "--key", "k.pub", "--source", ".", "--predicate-type", "https://example.com/p"}, "rebuild reads the SLSA provenance"},
		{[]string{"verify", "--bundle", "b.jsonl", "--key", "k.pub", "--sign-key", "k.key"}, "--sign-key needs --vsa-out"},
		{[]string{"verify", "--bundle", "b.jsonl", "--key", "k.pub", "--vsa-out", "v.json"}, "--vsa-out needs --sign-key"},
		{[]string{"verify", "oci-layout:x", "--key", "k.pub", "--sign-key", "k.key", "--vsa-out", "v.json"}, "work with --bundle FILE"},
	} {
		code, out, errOut := cli(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, want %d saying %q\n%s%s", strings.Join(tc.args, " "), code, exitUsage, tc.want, out, errOut)
		}
	}
}

// A bundle under another key fails as verify fails (exit 10); a verified
// provenance that records no source commit cannot be rebuilt (exit 1),
// and nothing is built.
func TestRebuildRefusesBeforeBuilding(t *testing.T) {
	t.Parallel()
	runDir, pub := fixtureRun(t, []runfixture.File{{Name: "build/a.fatbin", Size: 1000}})
	bundles := filepath.Join(runDir, "attestations.intoto.jsonl")
	other, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rb")
	if code, so, se := cli(t, "rebuild", "--bundle", bundles, "--key", other.Public, "--source", ".", "--out", out); code != exitSig {
		t.Errorf("rebuild under another key: exit %d, want %d\n%s%s", code, exitSig, so, se)
	}
	code, so, se := cli(t, "rebuild", "--bundle", bundles, "--key", pub, "--source", ".", "--out", out)
	if code != exitFailed || !strings.Contains(se, "cannot be rebuilt") || !strings.Contains(se, "no source commit recorded") {
		t.Errorf("rebuild of a provenance without a source: exit %d, want %d\n%s%s", code, exitFailed, so, se)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused rebuild made %s", out)
	}
}

// verify --vsa-out writes no VSA for a failed verification, and says so.
func TestVerifyVSAOnlyOnSuccess(t *testing.T) {
	t.Parallel()
	runDir, _ := fixtureRun(t, []runfixture.File{{Name: "build/a.fatbin", Size: 1000}})
	other, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	vsa := filepath.Join(t.TempDir(), "vsa.json")
	code, so, se := cli(t, "verify", "--bundle", filepath.Join(runDir, "attestations.intoto.jsonl"), "--key", other.Public, "--sign-key", other.Private, "--vsa-out", vsa)
	if code != exitSig || !strings.Contains(so, "No VSA written") {
		t.Errorf("verify under another key with --vsa-out: exit %d, want %d and no VSA\n%s%s", code, exitSig, so, se)
	}
	if _, err := os.Stat(vsa); err == nil {
		t.Error("a VSA was written for a failed verification")
	}
}
