package run

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// PushOption configures Push.
type PushOption func(*pushOptions) error

type pushOptions struct {
	allowFailed bool
	registry    []oci.Option
}

// AllowFailed publishes a run that did not pass (its attestations say
// so); Push refuses one otherwise.
func AllowFailed() PushOption {
	return func(o *pushOptions) error { o.allowFailed = true; return nil }
}

// WithRegistryOptions passes options to attest/oci (credentials, plain
// HTTP hosts, upload concurrency, retries).
func WithRegistryOptions(opts ...oci.Option) PushOption {
	return func(o *pushOptions) error { o.registry = append(o.registry, opts...); return nil }
}

// Push publishes the signed run in dir to ref (oci.Push): its released
// artifacts, read from the run directory's copies and checked against
// the subjects its attestations sign, as one OCI artifact whose manifest
// digest those attestations name (Attest puts it there), and each bundle
// as a referrer of it. It refuses a run that was not signed, one signed
// before releases were (no manifest subject), one whose files no longer
// make that manifest, and, without AllowFailed, a run that did not pass.
func Push(ctx context.Context, dir, ref string, opts ...PushOption) (*oci.PushResult, error) {
	var o pushOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	rd, err := rundir.Open(dir)
	if err != nil {
		return nil, err
	}
	if st := rd.Record.State; st != runtypes.Passed && !o.allowFailed {
		return nil, fmt.Errorf("refusing to push %s: the run %s\nhint: --allow-failed publishes it anyway (its attestations say it %s)", dir, st, st)
	}
	bundles, subjects, err := signedRelease(rd)
	if err != nil {
		return nil, err
	}
	want, arts, err := splitManifestSubject(subjects)
	if err != nil {
		return nil, fmt.Errorf("refusing to push %s: %w", dir, err)
	}
	files, missing, err := releaseFiles(ctx, rd, arts, false)
	if err != nil {
		return nil, fmt.Errorf("refusing to push %s: %w", dir, err)
	}
	if missing != "" {
		return nil, fmt.Errorf("refusing to push %s: artifact %s has no copy in the run directory (its step did not pass)", dir, missing)
	}
	rel, err := oci.NewRelease(files)
	if err != nil {
		return nil, err
	}
	if rel.Digest() != want {
		return nil, fmt.Errorf("refusing to push %s: its files make the release manifest %s, but the attestations sign %s", dir, rel.Digest(), want)
	}
	return oci.Push(ctx, ref, rel, bundles, o.registry...)
}

// signedRelease reads the run's attestations (unverified: Push publishes
// them, verifiers check them) as bundles to push, with the subjects
// their statements name.
func signedRelease(rd *rundir.Run) ([]oci.Bundle, []attest.Subject, error) {
	data, err := rd.Attestations()
	if err != nil {
		return nil, nil, err
	}
	if data == nil {
		return nil, nil, fmt.Errorf("refusing to push %s: the run has no attestations (%s)\nhint: sign it: gpuattest run PIPELINE --resume %s --key KEY", rd.Dir, AttestationsFile, rd.Dir)
	}
	name := filepath.Join(rd.Dir, AttestationsFile)
	entries, err := verify.ParseBundles(name, data)
	if err != nil {
		return nil, nil, err
	}
	var bundles []oci.Bundle
	var subjects []attest.Subject
	for _, e := range entries {
		if e.Problem != "" {
			return nil, nil, fmt.Errorf("%s: %s", e.Source, e.Problem)
		}
		st, err := sign.UnverifiedStatement(e.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.Source, err)
		}
		bundles = append(bundles, oci.Bundle{Data: e.Data, PredicateType: st.PredicateType})
		subjects = append(subjects, st.Subject...)
	}
	return bundles, subjects, nil
}

// splitManifestSubject returns the manifest digest the subjects name and
// the other subjects, once each, as artifacts.
func splitManifestSubject(subjects []attest.Subject) (string, []attest.FileDigest, error) {
	var manifest string
	seen := map[string]string{}
	for _, s := range subjects {
		d := s.Digest["sha256"]
		if s.Name == oci.ManifestSubjectName {
			if manifest != "" && manifest != "sha256:"+d {
				return "", nil, errors.New("the attestations name two release manifests")
			}
			manifest = "sha256:" + d
			continue
		}
		if old, ok := seen[s.Name]; ok && old != d {
			return "", nil, fmt.Errorf("the attestations name %s with two digests", s.Name)
		}
		seen[s.Name] = d
	}
	if manifest == "" {
		return "", nil, fmt.Errorf("its attestations name no release manifest (subject %q)\nhint: they were signed by an older gpuattest; sign the run again (gpuattest run PIPELINE --resume DIR --key KEY)", oci.ManifestSubjectName)
	}
	var arts []attest.FileDigest
	for n, d := range seen {
		arts = append(arts, attest.FileDigest{Path: n, SHA256: d})
	}
	sort.Slice(arts, func(i, j int) bool { return arts[i].Path < arts[j].Path })
	return manifest, arts, nil
}
