package oci

import (
	"context"

	"github.com/gpuattest/gpuattest/attest/verify"
)

// Fetched is a release read from a registry or an OCI layout without
// verifying its bundles: each file hashed as it was read, each bundle
// referrer checked against its digest.
type Fetched struct {
	// Source is REPOSITORY@sha256:<hex> (or oci-layout:DIR@...).
	Source string
	// Digest is the release manifest's digest.
	Digest string
	// Files are the released files, with the digests of what was served.
	Files []File
	// Entries are the bundle referrers, for the caller to verify.
	Entries []verify.Entry
	// FilesDir and LayoutDir are where Pull wrote the files and the OCI
	// layout copy; empty when it wrote nothing (and always for Fetch).
	FilesDir, LayoutDir string
}

// Fetch reads the release ref names and its bundle referrers as Verify
// does, within the size bounds of v, but leaves the bundles unverified:
// for a verification whose bundles are signed by different keys, such as
// a fleet dispatch and its node bundles (attest/dispatch). WithTimeout
// bounds it as it bounds Verify; WithFilesTo and WithLayoutTo are for
// Pull, and Fetch writes nothing.
func Fetch(ctx context.Context, v *verify.Verifier, ref string, opts ...Option) (*Fetched, error) {
	return withRef(ctx, v, ref, opts, "fetch", func(ctx context.Context, o *options) (*Fetched, error) {
		return fetchStaged(ctx, v, ref, o, nil)
	})
}

// Pull is Fetch for a release whose bundles the caller verifies itself
// (a fleet dispatch and its node bundles), that then writes it as Verify
// does: it stages the files (WithFilesTo) and an OCI layout copy of the
// release and its bundle referrers (WithLayoutTo), calls check with what
// was read, and writes them only when check returns true, each directory
// whole; otherwise nothing is left behind. check sees every file as
// hashed when served, and must hold each against what it trusts.
//
// An error from reading or from check comes back with a nil Fetched; a
// check that fails is a Fetched with FilesDir and LayoutDir empty; an
// error writing what passed comes back with the Fetched.
func Pull(ctx context.Context, v *verify.Verifier, ref string, check func(context.Context, *Fetched) (bool, error), opts ...Option) (*Fetched, error) {
	return withRef(ctx, v, ref, opts, "pull", func(ctx context.Context, o *options) (*Fetched, error) {
		return fetchStaged(ctx, v, ref, o, check)
	})
}

// fetchStaged reads the release into a stage and, with check, writes it
// where o says once check passes.
func fetchStaged(ctx context.Context, v *verify.Verifier, ref string, o *options, check func(context.Context, *Fetched) (bool, error)) (*Fetched, error) {
	files, layout := "", ""
	if check != nil {
		files, layout = o.filesTo, o.layoutTo
	}
	var out *Fetched
	wrote, err := readStaged(ctx, v, ref, o, files, layout, func(f *fetched, name string) (bool, error) {
		out = &Fetched{Source: name + "@" + f.id.String(), Digest: f.id.String(), Files: f.files, Entries: f.entries}
		if check == nil {
			return false, nil
		}
		ok, err := check(ctx, out)
		if err != nil {
			out = nil
		}
		return ok, err
	})
	if err != nil {
		return out, err
	}
	if wrote {
		out.FilesDir, out.LayoutDir = files, layout
	}
	return out, nil
}
