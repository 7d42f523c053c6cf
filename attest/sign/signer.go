package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"
)

// BundleMediaType is the media type of the bundles Sign makes.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// JSONLName is the conventional name of a run's attestation file.
const JSONLName = "attestations.intoto.jsonl"

// Option configures a Signer.
type Option func(*options) error

type options struct {
	tsaURLs     []string
	transport   http.RoundTripper
	logger      *slog.Logger
	timeout     time.Duration
	trustedRoot root.TrustedMaterial
	maxSize     int64
}

// WithTimestampURL adds an RFC 3161 timestamp authority (full URL of its
// timestamp endpoint); each bundle gets a signed timestamp from it.
func WithTimestampURL(url string) Option {
	return func(o *options) error {
		if url == "" {
			return errors.New("timestamp URL: empty")
		}
		o.tsaURLs = append(o.tsaURLs, url)
		return nil
	}
}

// WithTransport sets the HTTP transport for Fulcio and TSA requests.
func WithTransport(rt http.RoundTripper) Option {
	return func(o *options) error { o.transport = rt; return nil }
}

// WithLogger sets the logger for diagnostics (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler) // nil: discard, as everywhere
		}
		o.logger = l
		return nil
	}
}

// WithTimeout bounds each network request (default 30s).
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("timeout %s: expected a positive duration", d)
		}
		o.timeout = d
		return nil
	}
}

// WithTrustedRoot makes the signer verify each keyless bundle against tm
// right after signing it.
func WithTrustedRoot(tm root.TrustedMaterial) Option {
	return func(o *options) error { o.trustedRoot = tm; return nil }
}

// WithMaxStatementSize sets the largest statement signed, in bytes
// (default attest.DefaultMaxStatementSize, what verify accepts by
// default): a larger one would be refused by a verifier with the default
// limits.
func WithMaxStatementSize(bytes int64) Option {
	return func(o *options) error {
		if bytes <= 0 {
			return fmt.Errorf("max statement size %d: expected a positive number of bytes", bytes)
		}
		o.maxSize = bytes
		return nil
	}
}

// Signer signs statements into Sigstore bundles.
type Signer struct {
	opts options
	// keypair is nil for keyless signers, which make one per bundle.
	keypair    sgsign.Keypair
	fulcio     sgsign.CertificateProvider
	idToken    string
	rekors     []sgsign.Transparency
	tsas       []*sgsign.TimestampAuthority
	identifier string
}

func applyOptions(opts []Option) (options, error) {
	o := options{logger: slog.New(slog.DiscardHandler), timeout: 30 * time.Second, maxSize: attest.DefaultMaxStatementSize}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (s *Signer) addTSAs() {
	for _, u := range s.opts.tsaURLs {
		s.tsas = append(s.tsas, sgsign.NewTimestampAuthority(&sgsign.TimestampAuthorityOptions{
			URL: u, Timeout: s.opts.timeout, Retries: 1, Transport: s.opts.transport,
		}))
	}
}

// NewKeySigner returns a signer that signs with kp; bundles carry a public
// key hint as verification material.
func NewKeySigner(kp *Keypair, opts ...Option) (*Signer, error) {
	if kp == nil {
		return nil, errors.New("nil keypair")
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	s := &Signer{opts: o, keypair: kp, identifier: "key " + string(kp.GetHint())}
	s.addTSAs()
	return s, nil
}

// Identity says what signs: "key <hint>" or "keyless (fulcio URL)".
func (s *Signer) Identity() string { return s.identifier }

// Sign signs st into a Sigstore bundle v0.3 and returns its JSON (one
// line, no trailing newline).
func (s *Signer) Sign(ctx context.Context, st *attest.Statement) ([]byte, error) {
	payload, err := st.Marshal()
	if err != nil {
		return nil, err
	}
	return s.SignPayload(ctx, payload)
}

// SignPayload signs an already-encoded in-toto statement. The payload is
// validated first exactly as verify will parse it (attest.ParseStatement)
// and must be within the size verify accepts.
func (s *Signer) SignPayload(ctx context.Context, payload []byte) ([]byte, error) {
	if n := int64(len(payload)); n > s.opts.maxSize {
		return nil, fmt.Errorf("refusing to sign: the statement is %d bytes, more than the %d that verify accepts\nhint: pass --max-predicate-size to both sign and verify to go beyond", n, s.opts.maxSize)
	}
	st, err := attest.ParseStatement(payload)
	if err != nil {
		return nil, err
	}
	if err := attest.CheckPredicate(st.PredicateType, st.Predicate); err != nil {
		return nil, fmt.Errorf("refusing to sign: %w", err)
	}
	kp := s.keypair
	bo := sgsign.BundleOptions{
		Context:              ctx,
		TimestampAuthorities: s.tsas,
		TransparencyLogs:     s.rekors,
	}
	if kp == nil {
		eph, err := sgsign.NewEphemeralKeypair(nil)
		if err != nil {
			return nil, fmt.Errorf("generating ephemeral key: %w", err)
		}
		kp = eph
		bo.CertificateProvider = s.fulcio
		bo.CertificateProviderOptions = &sgsign.CertificateProviderOptions{IDToken: s.idToken}
		bo.TrustedRoot = s.opts.trustedRoot
	}
	pb, err := sgsign.Bundle(&sgsign.DSSEData{Data: payload, PayloadType: attest.PayloadType}, kp, bo)
	if err != nil {
		return nil, fmt.Errorf("signing statement: %w", err)
	}
	b, err := protojson.Marshal(pb)
	if err != nil {
		return nil, fmt.Errorf("encoding bundle: %w", err)
	}
	// protojson may add spaces; compacting keeps one bundle per line.
	var buf bytes.Buffer
	if err := compactJSON(&buf, b); err != nil {
		return nil, err
	}
	s.opts.logger.DebugContext(ctx, "signed statement", "signer", s.identifier, "bytes", buf.Len())
	return buf.Bytes(), nil
}

// SignStatements signs each statement, in order.
func SignStatements(ctx context.Context, s *Signer, stmts []*attest.Statement) ([][]byte, error) {
	out := make([][]byte, 0, len(stmts))
	for i, st := range stmts {
		b, err := s.Sign(ctx, st)
		if err != nil {
			return nil, fmt.Errorf("statement %d (%s): %w", i, st.PredicateType, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// AppendJSONL appends bundles to path, one JSON document per line,
// atomically: the file is rewritten through a temp file and renamed, so a
// crash leaves the old or the new content. The file is created when
// missing.
func AppendJSONL(path string, bundles [][]byte) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return writeJSONL(path, old, bundles)
}

// WriteJSONL writes bundles to path, one JSON document per line,
// replacing what was there atomically: a crash leaves the old file or the
// new one, never neither.
func WriteJSONL(path string, bundles [][]byte) error { return writeJSONL(path, nil, bundles) }

func writeJSONL(path string, old []byte, bundles [][]byte) error {
	var buf bytes.Buffer
	buf.Write(old)
	if len(old) > 0 && old[len(old)-1] != '\n' {
		buf.WriteByte('\n')
	}
	for i, b := range bundles {
		var line bytes.Buffer
		if err := compactJSON(&line, b); err != nil {
			return fmt.Errorf("bundle %d: %w", i, err)
		}
		buf.Write(line.Bytes())
		buf.WriteByte('\n')
	}
	return atomicfile.Write(path, buf.Bytes(), 0o644)
}

// ParseBundle decodes a bundle's JSON (any v0.1-v0.3 media type).
func ParseBundle(b []byte) (*bundle.Bundle, error) {
	var bb bundle.Bundle
	if err := bb.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("decoding sigstore bundle: %w", err)
	}
	return &bb, nil
}

// UnverifiedStatement decodes the in-toto statement a Sigstore bundle's
// DSSE envelope carries, checking no signature (verify.Verifier does):
// for bundles already verified, or for reading what a run directory's own
// attestations say, never for trusting them.
func UnverifiedStatement(data []byte) (*attest.Statement, error) {
	b, err := ParseBundle(data)
	if err != nil {
		return nil, err
	}
	env, err := b.Envelope()
	if err != nil {
		return nil, fmt.Errorf("bundle has no DSSE envelope: %w", err)
	}
	raw := env.RawEnvelope()
	if raw.PayloadType != attest.PayloadType {
		return nil, fmt.Errorf("payload type %q: expected %q", raw.PayloadType, attest.PayloadType)
	}
	payload, err := raw.DecodeB64Payload()
	if err != nil {
		return nil, err
	}
	return attest.ParseStatement(payload)
}

func compactJSON(w io.Writer, b []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return fmt.Errorf("bundle is not valid JSON: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteBundle writes one bundle to path: appended as a line (AppendJSONL)
// when path ends in ".jsonl", else replacing path atomically.
func WriteBundle(path string, b []byte) error {
	if strings.HasSuffix(path, ".jsonl") {
		return AppendJSONL(path, [][]byte{b})
	}
	var buf bytes.Buffer
	if err := compactJSON(&buf, b); err != nil {
		return err
	}
	buf.WriteByte('\n')
	return atomicfile.Write(path, buf.Bytes(), 0o644)
}
