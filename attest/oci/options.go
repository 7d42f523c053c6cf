package oci

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// Option configures Push and Verify.
type Option func(*options) error

type options struct {
	keychain  authn.Keychain
	insecure  map[string]bool
	jobs      int
	logger    *slog.Logger
	base      http.RoundTripper
	backoff   remote.Backoff
	filesTo   string
	layoutTo  string
	criteria  func(Criteria)
	userAgent string
	bundles   *BundleCache

	maxLayer, maxTotal      int64
	connect, idle, deadline time.Duration
}

// DefaultJobs is how many blobs Push uploads and Verify fetches at once
// by default.
const DefaultJobs = 3

// Default bounds of what Verify downloads and of how long the registry
// client waits.
const (
	// DefaultMaxLayerSize is the largest file (layer) Verify fetches.
	DefaultMaxLayerSize = 1 << 30
	// DefaultMaxTotalSize is the most all the files of a release may
	// add up to.
	DefaultMaxTotalSize = 4 << 30
	// DefaultConnectTimeout bounds a connection's dial and TLS
	// handshake.
	DefaultConnectTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a request may wait with no byte
	// received (or sent).
	DefaultIdleTimeout = 30 * time.Second
	// DefaultTimeout bounds a whole Push or Verify.
	DefaultTimeout = 30 * time.Minute
)

// retryStatus are the responses retried with backoff.
var retryStatus = []int{
	http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
}

func defaultOptions() options {
	return options{
		keychain: authn.DefaultKeychain,
		insecure: map[string]bool{},
		jobs:     DefaultJobs,
		logger:   slog.New(slog.DiscardHandler),
		// Three tries: 1 s after the first failure, 3 s after the second.
		backoff:   remote.Backoff{Duration: time.Second, Factor: 3, Jitter: 0.1, Steps: 3},
		userAgent: "gpuattest",
		maxLayer:  DefaultMaxLayerSize,
		maxTotal:  DefaultMaxTotalSize,
		connect:   DefaultConnectTimeout,
		idle:      DefaultIdleTimeout,
		deadline:  DefaultTimeout,
	}
}

func applyOptions(opts []Option) (*options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	o.base = newTransport(o.connect, o.idle)
	return &o, nil
}

// WithKeychain resolves registry credentials with k (default
// authn.DefaultKeychain: Docker's config and credential helpers).
func WithKeychain(k authn.Keychain) Option {
	return func(o *options) error {
		if k == nil {
			return errors.New("keychain: nil")
		}
		o.keychain = k
		return nil
	}
}

// WithInsecureRegistry allows plain HTTP to host (host or host:port).
// Without it plain HTTP is used only for loopback registries (localhost,
// 127.0.0.0/8, ::1); any other registry is spoken to over HTTPS.
func WithInsecureRegistry(host string) Option {
	return func(o *options) error {
		if host == "" || strings.ContainsAny(host, "/ ") {
			return fmt.Errorf("insecure registry %q: expected a host or host:port", host)
		}
		o.insecure[host] = true
		return nil
	}
}

// WithJobs uploads or fetches at most n blobs at once (default
// DefaultJobs).
func WithJobs(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("jobs %d: expected 1 or more", n)
		}
		o.jobs = n
		return nil
	}
}

// WithLogger receives diagnostics (default, and nil: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.logger = l
		return nil
	}
}

// WithRetryBackoff sets how failed requests (408, 429, 5xx, dropped
// connections) are retried (default: three tries, 1 s then 3 s apart).
func WithRetryBackoff(b remote.Backoff) Option {
	return func(o *options) error {
		if b.Steps < 1 {
			return fmt.Errorf("retry backoff: %d steps: expected 1 or more", b.Steps)
		}
		o.backoff = b
		return nil
	}
}

// WithMaxLayerSize refuses, before fetching anything, a release with a
// file (layer) of more than n bytes (default DefaultMaxLayerSize).
func WithMaxLayerSize(n int64) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("max layer size %d: expected 1 or more bytes", n)
		}
		o.maxLayer = n
		return nil
	}
}

// WithMaxTotalSize refuses, before fetching anything, a release whose
// files add up to more than n bytes (default DefaultMaxTotalSize).
func WithMaxTotalSize(n int64) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("max total size %d: expected 1 or more bytes", n)
		}
		o.maxTotal = n
		return nil
	}
}

// WithConnectTimeout bounds each connection's dial and TLS handshake
// (default DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("connect timeout %s: expected more than 0", d)
		}
		o.connect = d
		return nil
	}
}

// WithIdleTimeout fails a request that waits d with no byte received or
// sent: for the response's header, or inside the body (default
// DefaultIdleTimeout). The error names the registry's host.
func WithIdleTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("idle timeout %s: expected more than 0", d)
		}
		o.idle = d
		return nil
	}
}

// WithTimeout bounds a whole Push or Verify, however the registry
// trickles (default DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("timeout %s: expected more than 0", d)
		}
		o.deadline = d
		return nil
	}
}

// WithFilesTo makes Verify write the release's files under dir once
// everything verified. dir must not exist or be empty; it appears whole
// or not at all.
func WithFilesTo(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return errors.New("files directory: empty")
		}
		o.filesTo = dir
		return nil
	}
}

// WithLayoutTo makes Verify copy the release and its bundle referrers
// into an OCI image layout at dir once everything verified, for
// verifying offline (Verify of "oci-layout:DIR"). dir must not exist or
// be empty.
func WithLayoutTo(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			return errors.New("layout directory: empty")
		}
		o.layoutTo = dir
		return nil
	}
}

// Criteria is what Verify is about to check, reported before it checks.
type Criteria struct {
	// Source names what was fetched: REPO@sha256:<hex>, or
	// oci-layout:DIR@sha256:<hex>.
	Source string
	// Bundles is the number of bundle referrers found.
	Bundles int
	// Criteria are the Verifier's criteria for the fetched artifacts.
	Criteria []verify.Criterion
	// Entries are the bundles fetched, not yet verified.
	Entries []verify.Entry
}

// WithCriteria calls f with the criteria once the bundles are fetched
// and before any is verified or any file fetched (a front end prints
// them first); the files are those the manifest names.
func WithCriteria(f func(Criteria)) Option {
	return func(o *options) error { o.criteria = f; return nil }
}

// parseRef parses a registry reference, with plain HTTP where allowed.
func (o *options) parseRef(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("reference %q: %w\nhint: expected REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST] or oci-layout:DIR", ref, err)
	}
	if o.insecure[r.Context().RegistryStr()] {
		return name.ParseReference(ref, name.Insecure)
	}
	return r, nil
}

// guard is the base transport: plain HTTP only to loopback and insecure
// registries, HTTPS to everything else (go-containerregistry would also
// speak plain HTTP to private addresses).
func (o *options) guard() http.RoundTripper {
	return &schemeGuard{base: o.base, insecure: o.insecure}
}

// transport is guard with retries and backoff, for the requests this
// package makes itself (go-containerregistry adds its own).
func (o *options) transport() http.RoundTripper {
	return transport.NewRetry(o.guard(), transport.WithRetryBackoff(o.backoff), transport.WithRetryStatusCodes(retryStatus...))
}

// remoteOptions are go-containerregistry's options for o.
func (o *options) remoteOptions() []remote.Option {
	return []remote.Option{
		remote.WithAuthFromKeychain(o.keychain),
		remote.WithTransport(o.guard()),
		remote.WithRetryBackoff(o.backoff),
		remote.WithRetryStatusCodes(retryStatus...),
		remote.WithJobs(o.jobs),
		remote.WithUserAgent(o.userAgent),
	}
}

// schemeGuard sends plain HTTP requests over HTTPS unless their host is
// a loopback address or named insecure.
type schemeGuard struct {
	base     http.RoundTripper
	insecure map[string]bool
}

// RoundTrip implements http.RoundTripper.
func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || g.plainAllowed(req.URL.Host) {
		return g.base.RoundTrip(req)
	}
	up := req.Clone(req.Context())
	up.URL.Scheme = "https"
	return g.base.RoundTrip(up)
}

func (g *schemeGuard) plainAllowed(hostport string) bool {
	if g.insecure[hostport] {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if g.insecure[host] || host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
