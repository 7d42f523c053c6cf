package verify

import (
	"encoding/base64"
	"fmt"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/internal/limits"
)

// Limits on what a Verifier reads. A bundle is refused before it is
// parsed when it is larger than a statement of the maximum size could
// make it; a statement larger than the maximum is refused after its
// signature is checked, before it is decoded.
const (
	// DefaultMaxPredicateSize is the largest signed statement (the
	// predicate and the subjects: the DSSE payload) verified by default.
	DefaultMaxPredicateSize = attest.DefaultMaxStatementSize
	// MaxBundleDepth is the deepest nesting of objects and arrays a
	// bundle's JSON may have.
	MaxBundleDepth = 32
	// bundleSlack is what a bundle may hold beyond its payload:
	// certificates, transparency log entries, timestamps.
	bundleSlack = 1 << 20
	// bundlesPerFile is how many bundles of the maximum size a bundle
	// file may hold.
	bundlesPerFile = 8
	// MaxBundles is the most bundles (lines) a bundle file may hold: each
	// is reported with its checks, and 100,000 one-line `{}` bundles took
	// 330 MB to report.
	MaxBundles = 10_000
)

// maxEntrySize is the largest bundle (one JSON document) read.
func (o *options) maxEntrySize() int64 {
	return int64(base64.StdEncoding.EncodedLen(int(o.maxPredicateSize))) + bundleSlack
}

// maxFileSize is the largest bundle file read.
func (o *options) maxFileSize() int64 { return bundlesPerFile * o.maxEntrySize() }

// limitHint says how to raise the predicate limit.
func (o *options) limitHint() string {
	return fmt.Sprintf("hint: the limit follows --max-predicate-size (now %s); raise it if you expect statements this large", limits.Human(o.maxPredicateSize))
}

// MaxBundleSize returns the largest bundle this Verifier reads, in bytes
// (it follows WithMaxPredicateSize): a reader of bundles from elsewhere
// (a registry) stops there too.
func (v *Verifier) MaxBundleSize() int64 { return v.opts.maxEntrySize() }

// MaxBundlesSize returns the most all the bundles of one Verify call may
// add up to, in bytes: the size of the largest bundle file.
func (v *Verifier) MaxBundlesSize() int64 { return v.opts.maxFileSize() }
