// Package registrytest starts real registries on 127.0.0.1 for tests:
// Debian's docker-registry (distribution 2.8, which has no referrers API)
// with its storage in a directory the test can read and change, and
// go-containerregistry's in-process registry with the referrers API.
// Both stop when the test ends.
package registrytest

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// Docker is a running docker-registry.
type Docker struct {
	// Host is its host:port on 127.0.0.1.
	Host string
	// Storage is its filesystem storage's root directory.
	Storage string
}

// BlobPath returns where the registry keeps the blob with digest
// "sha256:<hex>".
func (d *Docker) BlobPath(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(d.Storage, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}

// StartDocker runs /usr/bin/docker-registry on a free port of 127.0.0.1
// with filesystem storage in a temporary directory (deletes enabled); a
// missing docker-registry fails the test in CI and skips it elsewhere.
func StartDocker(t testing.TB) *Docker {
	t.Helper()
	bin := testenv.RequireTool(t, "docker-registry")
	dir := t.TempDir()
	for attempt := range 3 {
		addr := freeAddr(t)
		cfg := filepath.Join(dir, fmt.Sprintf("config-%d.yml", attempt))
		conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if stop, ok := serve(t, bin, cfg, addr); ok {
			t.Cleanup(stop)
			return &Docker{Host: addr, Storage: filepath.Join(dir, "data")}
		}
	}
	t.Fatal("docker-registry did not start")
	return nil
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serve starts docker-registry with cfg and waits (10 s at most) for
// addr to answer /v2/; it returns how to stop it.
func serve(t testing.TB, bin, cfg, addr string) (func(), bool) {
	cmd := exec.Command(bin, "serve", cfg)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting docker-registry: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Logf("docker-registry on %s exited: %s", addr, out.String())
			return nil, false // the port was taken? try another
		default:
		}
		if resp, err := client.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, true
			}
		}
	}
	stop()
	t.Logf("docker-registry on %s did not come up: %s", addr, out.String())
	return nil, false
}

// StartInProcess serves go-containerregistry's registry, with the
// referrers API, on 127.0.0.1 and returns its host:port. wrap, when not
// nil, wraps its handler (to inject failures).
func StartInProcess(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}
