package image

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultPlatform is the platform images are resolved for unless
// WithPlatform says otherwise.
const DefaultPlatform = "linux/amd64"

// Option configures Resolve, Pull, Extract, CheckLock and NewPinner.
type Option func(*options) error

type options struct {
	keychain  authn.Keychain
	transport http.RoundTripper
	platform  v1.Platform
	baseDir   string
	logger    *slog.Logger
	now       func() time.Time

	// CheckLock only.
	pipelineFile string
	skipSources  bool

	// NewPinner only.
	locked bool
}

func applyOptions(opts []Option) (*options, error) {
	o := &options{
		keychain: authn.DefaultKeychain,
		platform: v1.Platform{OS: "linux", Architecture: "amd64"},
		logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:      time.Now,
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// WithKeychain sets where registry credentials come from (the docker
// keychain, authn.DefaultKeychain, when not set).
func WithKeychain(kc authn.Keychain) Option {
	return func(o *options) error {
		if kc == nil {
			return errors.New("image.WithKeychain: nil keychain")
		}
		o.keychain = kc
		return nil
	}
}

// WithTransport sets the HTTP transport used to talk to registries.
func WithTransport(rt http.RoundTripper) Option {
	return func(o *options) error {
		if rt == nil {
			return errors.New("image.WithTransport: nil transport")
		}
		o.transport = rt
		return nil
	}
}

// WithPlatform sets the platform ("os/arch[/variant]") an index is resolved
// for; linux/amd64 when not set.
func WithPlatform(platform string) Option {
	return func(o *options) error {
		p, err := v1.ParsePlatform(platform)
		if err != nil || p.OS == "" || p.Architecture == "" {
			return fmt.Errorf("image.WithPlatform: %q: expected os/arch such as linux/amd64", platform)
		}
		o.platform = *p
		return nil
	}
}

// WithBaseDir sets the directory that relative oci-layout: and
// docker-archive: paths are relative to (normally the pipeline's directory);
// the process's working directory when not set.
func WithBaseDir(dir string) Option {
	return func(o *options) error {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("image.WithBaseDir: %w", err)
		}
		o.baseDir = abs
		return nil
	}
}

// WithLogger sets the logger for progress and notes; discarded when not set.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		o.logger = l
		return nil
	}
}

// WithClock sets the clock that stamps resolved_at (tests pin it).
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("image.WithClock: nil clock")
		}
		o.now = now
		return nil
	}
}
