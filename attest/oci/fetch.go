package oci

import (
	"context"
	"errors"

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
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, errors.New("fetch: nil verifier")
	}
	ctx, cancel := o.withDeadline(ctx, timeoutSource(ref, o))
	defer cancel()
	f, err := fetchRef(ctx, v, ref, o)
	return f, timedOut(ctx, err)
}

func fetchRef(ctx context.Context, v *verify.Verifier, ref string, o *options) (*Fetched, error) {
	st, err := newStage("", "")
	if err != nil {
		return nil, err
	}
	defer st.discard()
	src, err := openSource(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	defer src.close()
	f, err := fetch(ctx, src, v, st, o)
	if err != nil {
		return nil, err
	}
	return &Fetched{Source: src.name() + "@" + f.id.String(), Digest: f.id.String(), Files: f.files, Entries: f.entries}, nil
}
