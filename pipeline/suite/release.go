package suite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	rel.Dir = filepath.ToSlash(filepath.Join("steps", s.Step.ID, ReferenceReleaseDir))
	s.Logger.Info("reference release verified", "step", s.Step.ID, "release", rel.Source, "files", len(rel.Files))
	return rel, dir, nil
}
