package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// newTransport is the base transport: go-containerregistry's default,
// with dials and TLS handshakes bounded by connect, and every request
// failed when it waits idle with no byte moving.
func newTransport(connect, idle time.Duration) http.RoundTripper {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	t.TLSHandshakeTimeout = connect
	return &idleGuard{base: t, idle: idle}
}

// StalledError is the error of a request to a registry that sent (or
// took) no byte for the idle timeout.
type StalledError struct {
	// Host is the registry's host:port.
	Host string
	// Idle is the idle timeout.
	Idle time.Duration
}

// Error implements error.
func (e *StalledError) Error() string {
	return fmt.Sprintf("registry %s sent nothing for %s (the idle timeout)\nhint: the registry or the network is stalled; raise the limit with --registry-idle-timeout", e.Host, e.Idle)
}

// TimeoutError is the error of a Push or Verify that did not finish
// within its overall timeout.
type TimeoutError struct {
	// Source is the registry's host:port, or the layout read.
	Source string
	// Timeout is the overall timeout.
	Timeout time.Duration
}

// Error implements error.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: not done within the overall timeout of %s\nhint: the registry may be trickling its answer; raise the limit with --registry-timeout", e.Source, e.Timeout)
}

// withDeadline bounds ctx by o's overall timeout; the cause names
// source.
func (o *options) withDeadline(ctx context.Context, source string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, o.deadline, &TimeoutError{Source: source, Timeout: o.deadline})
}

// timedOut returns the overall timeout's error when ctx ended with it,
// else err.
func timedOut(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var te *TimeoutError
	if cause := context.Cause(ctx); errors.As(cause, &te) {
		return te
	}
	return err
}

// idleGuard fails a request when it waits idle: idle from the moment it
// is sent (or its body's last byte was read) to its response's header,
// or inside a read of its response body.
type idleGuard struct {
	base http.RoundTripper
	idle time.Duration
}

// RoundTrip implements http.RoundTripper.
func (g *idleGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{cancel: cancel, idle: g.idle, stalled: &StalledError{Host: req.URL.Host, Idle: g.idle}}
	w.timer = time.AfterFunc(g.idle, w.fire)
	out := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = &sendBody{ReadCloser: req.Body, w: w}
	}
	resp, err := g.base.RoundTrip(out)
	w.timer.Stop()
	if err != nil {
		cancel(nil)
		return nil, w.err(err)
	}
	resp.Body = &recvBody{rc: resp.Body, w: w}
	return resp, nil
}

// watch is one request's idle timer.
type watch struct {
	timer   *time.Timer
	idle    time.Duration
	cancel  context.CancelCauseFunc
	stalled *StalledError
	mu      sync.Mutex
	fired   bool
}

func (w *watch) fire() {
	w.mu.Lock()
	w.fired = true
	w.mu.Unlock()
	w.cancel(w.stalled)
}

// err is err, or the stall when the timer ended the request.
func (w *watch) err(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		return w.stalled
	}
	return err
}

// sendBody restarts the idle timer each time the transport reads more of
// the request's body to send.
type sendBody struct {
	io.ReadCloser
	w *watch
}

func (b *sendBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.timer.Reset(b.w.idle)
	return n, err
}

// recvBody runs the idle timer while a read of the response body waits.
type recvBody struct {
	rc io.ReadCloser
	w  *watch
}

func (b *recvBody) Read(p []byte) (int, error) {
	b.w.timer.Reset(b.w.idle)
	n, err := b.rc.Read(p)
	b.w.timer.Stop()
	if err != nil && err != io.EOF {
		err = b.w.err(err)
	}
	return n, err
}

func (b *recvBody) Close() error {
	b.w.timer.Stop()
	err := b.rc.Close()
	b.w.cancel(nil)
	return err
}
