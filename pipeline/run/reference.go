package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/step"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// releaseFetcher verifies a benchmark reference's published release
// (reference.release) with attest/oci before the step runs anything:
// the key and policy the step names, read through an os.Root of the
// pipeline's root, and the release from a registry or an OCI layout
// inside the root. Only verified files are written.
type releaseFetcher struct {
	registry []oci.Option
}

var _ suite.ReleaseFetcher = releaseFetcher{}

// FetchRelease implements suite.ReleaseFetcher.
func (f releaseFetcher) FetchRelease(ctx context.Context, s *step.Context, dir string) (*suite.ReferenceRelease, error) {
	r := s.Step.Reference
	if r == nil || r.Release == "" {
		return nil, errors.New("the step names no reference.release")
	}
	root, err := os.OpenRoot(s.Root)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := &suite.ReferenceRelease{Ref: r.Release, Key: r.Key, Policy: "default"}
	keyData, err := readStepFile(s, root, "reference.key", r.Key, sign.MaxPublicKeySize, "public key")
	if err != nil {
		return nil, err
	}
	pub, err := sign.ParsePublicKey(r.Key, keyData)
	if err != nil {
		return nil, err
	}
	out.KeySHA256 = sha256Hex(keyData)
	pol := policy.Default()
	if name, ok := r.BuiltinPolicy(); ok {
		if pol, err = policy.Builtin(name, false); err != nil {
			return nil, fmt.Errorf("reference.policy: %w", err)
		}
		out.Policy = r.Policy
	} else if r.Policy != "" {
		data, err := readStepFile(s, root, "reference.policy", r.Policy, policy.MaxSize, "policy")
		if err != nil {
			return nil, err
		}
		if pol, err = policy.Parse(r.Policy, data); err != nil {
			return nil, err
		}
		out.Policy, out.PolicySHA256 = r.Policy, sha256Hex(data)
	}
	v, err := verify.New(verify.WithKey(pub, r.Key), verify.WithPolicy(pol))
	if err != nil {
		return nil, err
	}
	ref, err := releaseRef(s, r.Release)
	if err != nil {
		return nil, err
	}
	res, err := oci.Verify(ctx, v, ref, append(f.registry[:len(f.registry):len(f.registry)], oci.WithFilesTo(dir))...)
	if err != nil {
		return nil, err
	}
	if !res.Report.Verified {
		return nil, notVerified(res.Report, r.Key)
	}
	out.Source, out.Digest, out.Bundles = res.Source, res.Digest, len(res.Report.Bundles)
	if d, ok := pipeline.LayoutDir(r.Release); ok {
		// Recorded as the step names it: no local path goes into a record.
		out.Source = pipeline.LayoutPrefix + d + "@" + res.Digest
	}
	for _, file := range res.Files {
		out.Files = append(out.Files, step.File{Path: file.Name, SHA256: strings.TrimPrefix(file.SHA256, "sha256:"), Size: file.Size})
	}
	return out, nil
}

// releaseRef returns the reference to read: a registry reference as
// given, or an oci-layout: directory resolved against the pipeline file
// and kept inside the pipeline's root, symlinks included.
func releaseRef(s *step.Context, ref string) (string, error) {
	dir, ok := pipeline.LayoutDir(ref)
	if !ok {
		return ref, nil
	}
	rel, err := s.FileRel("reference.release", dir)
	if err != nil {
		return "", err
	}
	abs := filepath.Join(s.Root, rel)
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%s%s: %w\nhint: write the layout with gpuattest pull REF --to oci-layout:DIR", pipeline.LayoutPrefix, dir, err)
	}
	if r, err := filepath.Rel(s.Root, real); err != nil || !filepath.IsLocal(r) && r != "." {
		return "", fmt.Errorf("%s resolves to %s (through a symlink), outside the pipeline's root %s\nhint: keep the layout inside the root", ref, real, s.Root)
	}
	return pipeline.LayoutPrefix + real + strings.TrimPrefix(ref, pipeline.LayoutPrefix+dir), nil
}

// readStepFile reads name, a path the step gives relative to the
// pipeline file, through root: a regular file of at most max bytes that
// no path or symlink leads out of the root to.
func readStepFile(s *step.Context, root *os.Root, field, name string, max int64, what string) ([]byte, error) {
	rel, err := s.FileRel(field, name)
	if err != nil {
		return nil, err
	}
	h, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && strings.Contains(err.Error(), "escapes") {
			return nil, fmt.Errorf("%s %s leads outside the pipeline's root %s (through a symlink)\nhint: gpuattest reads a step's files only inside the root", field, name, s.Root)
		}
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	defer h.Close()
	st, err := h.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s is a %s, not a regular file", field, name, st.Mode().Type())
	}
	return limits.ReadAll(h, max, name, what)
}

// notVerified says why a release did not verify: the first failed
// check, with the verification's failure class.
func notVerified(rep *verify.Report, key string) error {
	why := "no attestation verified"
	for _, c := range rep.Checks {
		if !c.Passed {
			why = c.Check
			if c.Target != "" {
				why += " " + c.Target
			}
			if c.Detail != "" {
				why += ": " + c.Detail
			}
			break
		}
	}
	hint := "the release changed since it was signed, or was not signed by this key; nothing from it was run"
	switch rep.Failure {
	case verify.FailureSignature:
		hint = fmt.Sprintf("its attestations are not signed by %s (or were changed); nothing from it was run", key)
	case verify.FailurePolicy:
		hint = "the release's attestations do not meet the policy (reference.policy names another); nothing from it was run"
	}
	return fmt.Errorf("%w (%s): %s\nhint: %s", ErrReleaseNotVerified, rep.Failure, why, hint)
}

// ErrReleaseNotVerified is wrapped by the error of a benchmark step whose
// reference release did not verify.
var ErrReleaseNotVerified = errors.New("the release did not verify")

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
