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
}

// Fetch reads the release ref names and its bundle referrers as Verify
// does, within the size bounds of v, but leaves the bundles unverified:
// for a verification whose bundles are signed by different keys, such as
// a fleet dispatch and its node bundles (attest/dispatch). WithTimeout
// bounds it as it bounds Verify.
func Fetch(ctx context.Context, v *verify.Verifier, ref string, opts ...Option) (*Fetched, error) {
	return withRef(ctx, v, ref, opts, "fetch", func(ctx context.Context, o *options) (*Fetched, error) {
		st, err := newStage("", "")
		if err != nil {
			return nil, err
		}
		defer st.discard()
		f, name, err := readRef(ctx, v, ref, o, st)
		if err != nil {
			return nil, err
		}
		return &Fetched{Source: name + "@" + f.id.String(), Digest: f.id.String(), Files: f.files, Entries: f.entries}, nil
	})
}
