// Package oci publishes a gpuattest release to an OCI registry and reads
// it back, in the layout that cosign v3, oras and GitHub's attestations
// use.
//
// A Release is the released files as one OCI artifact: an image manifest
// with artifactType ReleaseArtifactType, the empty config and one layer
// per file (annotated with its title), in a fixed order and with no
// timestamp, so that its digest is known from the files alone, before
// anything is pushed or signed. The run's statements name that digest as
// a subject (ManifestSubjectName), which is what registry tools check.
//
// Push uploads a Release and each Sigstore bundle as a referrer of it
// (artifactType and layer media type BundleMediaType, annotations
// AnnotationBundleContent, AnnotationPredicateType, and the bundle
// layer's digest and size, AnnotationBundleDigest and
// AnnotationBundleSize, which the referrers list repeats), through the
// referrers API where the registry has it and the OCI tag schema
// (sha256-<hex> index) otherwise. It is idempotent: what is there is not
// written again, so a second push, or one after a killed push, completes
// what is missing and changes nothing else.
//
// Verify resolves a reference (a registry, or oci-layout:DIR offline)
// and reads what it names in an order that bounds what a hostile
// registry can make it read: the manifest, whose sha256 must be the
// digest asked for and the registry's Docker-Content-Digest, and whose
// files must be within the size limits; the referrers, checked as they
// stream in, a few at a time, those that cannot be bundles dropped
// unread (a bundle whose listing names its layer is fetched by that
// digest without its referrer manifest, and read through the manifest
// when the hint is absent, is not that digest, names another release,
// or names a layer another referrer names; a BundleCache keeps bundles
// by digest, hashed again when read); the bundles' signatures, of which
// one must name the manifest before any layer is fetched; then every layer, hashed as served. It
// verifies the bundles with an attest/verify Verifier, with every layer
// and the manifest as artifacts that must be subjects. With WithFilesTo
// or WithLayoutTo it then writes the files or an OCI layout copy, only
// when everything verified, all at once.
//
// Fetch reads a release the same way but leaves its bundles unverified,
// for a caller that verifies them itself (a fleet dispatch and its node
// bundles, signed by different keys); Pull is Fetch that then writes the
// files or the layout copy as Verify does, once the caller's check passed.
//
// Credentials come from authn.DefaultKeychain; plain HTTP is used only
// for loopback registries and those named with WithInsecureRegistry;
// requests are retried with backoff on 408, 429 and 5xx, and bounded by
// a connect, an idle and an overall timeout whose errors name the host
// (StalledError, TimeoutError). The package never prints.
//
// The files hold one job each: mediatypes.go (the names), release.go
// (Release), options.go (Option), source.go (registry and layout
// reading), push.go (Push), verify.go (Verify), fetch.go (Fetch, Pull),
// stage.go (writing files and layouts), timeout.go (the transport's
// timeouts), bundlecache.go (BundleCache).
package oci
