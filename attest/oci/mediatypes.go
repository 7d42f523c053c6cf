package oci

import "github.com/gpuattest/gpuattest/attest"

// Media types and annotations of a published release.
const (
	// ReleaseArtifactType is the artifactType of a release manifest.
	ReleaseArtifactType = "application/vnd.gpuattest.release.v1+json"
	// FileMediaType is the media type of a released file's layer: the
	// file's bytes as they are.
	FileMediaType = "application/octet-stream"
	// EmptyConfigMediaType is the media type of the empty config ("{}")
	// that artifacts carry.
	EmptyConfigMediaType = "application/vnd.oci.empty.v1+json"
	// BundleMediaType is the artifactType of a bundle referrer and the
	// media type of its one layer, a Sigstore bundle v0.3 (cosign v3's
	// layout).
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// AnnotationTitle names a layer's file (a slash-separated relative
	// path).
	AnnotationTitle = "org.opencontainers.image.title"
	// AnnotationBundleContent says what a bundle holds; always
	// BundleContentDSSE here.
	AnnotationBundleContent = "dev.sigstore.bundle.content"
	// BundleContentDSSE is AnnotationBundleContent's value.
	BundleContentDSSE = "dsse-envelope"
	// AnnotationPredicateType is the predicate type of the statement a
	// bundle signs.
	AnnotationPredicateType = "dev.sigstore.bundle.predicateType"
	// AnnotationBundleDigest and AnnotationBundleSize, on a bundle
	// referrer's manifest (and so on its descriptor in the referrers
	// list), are the digest and size of its one bundle layer: a reader
	// fetches the bundle by them without fetching the referrer manifest.
	// They are hints: the bundle fetched is hashed against the digest and
	// verified by its signature and subjects as any other, and a referrer
	// without them (pushed by an older gpuattest, or by cosign) is read
	// through its manifest.
	AnnotationBundleDigest = "dev.gpuattest.bundle.digest"
	AnnotationBundleSize   = "dev.gpuattest.bundle.size"
	// ManifestSubjectName is the subject name under which statements
	// name the release manifest's digest.
	ManifestSubjectName = attest.ManifestSubjectName

	// bundleMediaTypePrefix is what every Sigstore bundle media type
	// starts with.
	bundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"
	// cosignKindAnnotation on a layout's index entry marks the image
	// that `cosign verify-attestation --local-image` checks.
	cosignKindAnnotation = "kind"
	cosignKindImage      = "dev.cosignproject.cosign/image"
)

// emptyJSON is the empty config's content.
var emptyJSON = []byte("{}")
