package oci

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConnectTimeout: a server on 127.0.0.1 that accepts the connection
// but never answers the TLS handshake fails the request after the
// connect timeout, before the idle one.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	client := &http.Client{Transport: newTransport(200*time.Millisecond, 10*time.Second)}
	start := time.Now()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+l.Addr().String()+"/v2/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a server that never answers the handshake answered")
	}
	if took := time.Since(start); took > 5*time.Second || !strings.Contains(err.Error(), "TLS handshake timeout") || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Errorf("after %s: %v, want a TLS handshake timeout naming %s after about 200ms", took, err, l.Addr())
	}
}
