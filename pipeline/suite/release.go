package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// ReferenceDirEnv names the directory holding the verified files of a
// benchmark reference's published release, in the reference's
// environment.
const ReferenceDirEnv = "GPUATTEST_REFERENCE_DIR"

// ReferenceReleaseDir is the directory, in the step directory, that the
// verified files of the reference's release are written to.
const ReferenceReleaseDir = "reference-release"

// ReleaseFetcher verifies the published release a benchmark's reference
// names (reference.release) and writes its files. pipeline/run supplies
// the one that reads registries and OCI layouts (attest/oci).
type ReleaseFetcher interface {
	// FetchRelease verifies s.Step.Reference.Release with the step's
	// reference.key (and reference.policy) and, only when it verified,
	// writes the release's files into dir, which does not exist. A
	// release that does not verify, or cannot be read, is an error that
	// says why; nothing is then written.
	FetchRelease(ctx context.Context, s *step.Context, dir string) (*ReferenceRelease, error)
}

// ReferenceRelease is the published release a benchmark's reference ran
// against, as it was verified: which release, by which key and policy.
type ReferenceRelease struct {
	// Ref is the release as the step names it (reference.release).
	Ref string `json:"ref"`
	// Source is what was read: REPOSITORY@sha256:<hex> or
	// oci-layout:DIR@sha256:<hex>.
	Source string `json:"source"`
	// Digest is the verified release manifest's digest.
	Digest string `json:"digest"`
	// Key is the public key file as the step names it; KeySHA256 the hex
	// sha256 of its bytes.
	Key       string `json:"key"`
	KeySHA256 string `json:"key_sha256"`
	// Policy is the policy the attestations were checked against: a file
	// as the step names it, or "default"; PolicySHA256 is the hex sha256
	// of a policy file's bytes.
	Policy       string `json:"policy"`
	PolicySHA256 string `json:"policy_sha256,omitempty"`
	// Bundles is the number of verified attestations.
	Bundles int `json:"bundles"`
	// Files are the release's files (name, sha256, size), written under
	// Dir, which is relative to the run directory.
	Files []step.File `json:"files"`
	Dir   string      `json:"dir"`
}

// fetchRelease verifies and writes the step's reference release into the
// step directory, before anything runs, and returns it with the absolute
// directory of its files.
func (b Benchmark) fetchRelease(ctx context.Context, s *step.Context) (*ReferenceRelease, string, error) {
	ref := s.Step.Reference
	if b.Releases == nil {
		return nil, "", fmt.Errorf("step %s: reference.release %q: this executor has no release fetcher\nhint: run the pipeline with gpuattest run (pipeline/run supplies one)", s.Step.ID, ref.Release)
	}
	dir := filepath.Join(s.StepDir, ReferenceReleaseDir)
	// What an earlier attempt of the step left is not reused: the
	// release is verified again.
	if err := os.RemoveAll(dir); err != nil {
		return nil, "", fmt.Errorf("step %s: removing %s: %w", s.Step.ID, dir, err)
	}
	if err := os.MkdirAll(s.StepDir, 0o755); err != nil {
		return nil, "", err
	}
	rel, err := b.Releases.FetchRelease(ctx, s, dir)
	if err != nil {
		return nil, "", fmt.Errorf("step %s: reference.release %s: %w", s.Step.ID, ref.Release, err)
	}
	if rel == nil {
		return nil, "", errors.New("release fetcher returned nothing")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, "", fmt.Errorf("step %s: reference.release %s: verified, but no files were written to %s", s.Step.ID, ref.Release, dir)
	}
	rel.Dir = runlayout.StepRel(s.Step.ID, ReferenceReleaseDir)
	s.Logger.Info("reference release verified", "step", s.Step.ID, "release", rel.Source, "files", len(rel.Files))
	return rel, dir, nil
}

// recheckRelease checks, for a benchmark whose reference names a
// published release, that the step's benchmark.json (checked against its
// recorded digest) records that release as verified, pinned to the digest
// the step names if it names one, with the key and policy files the step
// names now; and that the files the reference ran are still those.
func recheckRelease(s *step.Context, files []recordedFile) error {
	r := s.Step.Reference
	if r == nil || r.Release == "" {
		return nil
	}
	var bj *recordedFile
	for i := range files {
		if files[i].name == runlayout.BenchmarkFile {
			bj = &files[i]
		}
	}
	if bj == nil {
		return errors.New("run.json records no benchmark.json for it: nothing says which release the reference ran")
	}
	var d BenchmarkDetails
	if err := json.Unmarshal(bj.data, &d); err != nil {
		return fmt.Errorf("%s: %w", bj.Path, err)
	}
	if d.Reference == nil || d.Reference.Release == nil {
		return fmt.Errorf("its benchmark.json records no verified release, but the step's reference names %s", r.Release)
	}
	rel := d.Reference.Release
	switch {
	case rel.Ref != r.Release:
		return fmt.Errorf("its reference ran release %s, but the step names %s", rel.Ref, r.Release)
	case pinnedDigest(r.Release) != "" && rel.Digest != pinnedDigest(r.Release):
		return fmt.Errorf("its reference ran release manifest %s, but the step pins %s", rel.Digest, pinnedDigest(r.Release))
	}
	if err := recheckFileDigest(s, "reference.key", r.Key, rel.Key, rel.KeySHA256); err != nil {
		return err
	}
	if r.Policy == "" {
		if rel.Policy != "default" {
			return fmt.Errorf("its release was verified with policy %s, but the step names none (the default)", rel.Policy)
		}
	} else if _, ok := r.BuiltinPolicy(); ok {
		if rel.Policy != r.Policy {
			return fmt.Errorf("its release was verified with policy %s, but the step names %s", rel.Policy, r.Policy)
		}
	} else if err := recheckFileDigest(s, "reference.policy", r.Policy, rel.Policy, rel.PolicySHA256); err != nil {
		return err
	}
	return recheckReleaseFiles(s, rel)
}

// pinnedDigest returns the sha256:<hex> a reference is pinned to, or "".
func pinnedDigest(ref string) string {
	i := strings.LastIndex(ref, "@sha256:")
	if i < 0 {
		return ""
	}
	return ref[i+1:]
}

// recheckFileDigest checks that the file the step names in field (name,
// relative to the pipeline file) is the one recorded (as recName, with
// hex sha256 recSum).
func recheckFileDigest(s *step.Context, field, name, recName, recSum string) error {
	if recName != name {
		return fmt.Errorf("its release was verified with %s %s, but the step names %s", field, recName, name)
	}
	rel, err := s.FileRel(field, name)
	if err != nil {
		return err
	}
	b, err := newRootedFile(s, rel, name).read()
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != recSum {
		return fmt.Errorf("its release was verified with %s %s of sha256 %s, but that file now has sha256 %s", field, name, short12(recSum), got[:12])
	}
	return nil
}

// recheckReleaseFiles checks the release's files in the step directory
// against the digests recorded when they were verified.
func recheckReleaseFiles(s *step.Context, rel *ReferenceRelease) error {
	if len(rel.Files) == 0 {
		return errors.New("its benchmark.json records a release with no files")
	}
	root, err := os.OpenRoot(filepath.Join(s.StepDir, ReferenceReleaseDir))
	if err != nil {
		return fmt.Errorf("the verified release's files: %w", err)
	}
	defer root.Close()
	for _, f := range rel.Files {
		h, err := root.Open(filepath.FromSlash(f.Path))
		if err != nil {
			return fmt.Errorf("the verified release's file %s: %w", f.Path, err)
		}
		sum, _, err := digest.Reader(h)
		h.Close()
		if err != nil {
			return err
		}
		if sum != f.SHA256 {
			return fmt.Errorf("the verified release's file %s has sha256 %s, but %s was verified", f.Path, short12(sum), short12(f.SHA256))
		}
	}
	return nil
}
