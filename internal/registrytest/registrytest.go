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
	testenv.RequireTool(t, "docker-registry")
	d, stop, err := ServeDocker(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return d
}

// ServeDocker runs docker-registry (from PATH) on a free port of
// 127.0.0.1 with its configuration and storage under dir, and returns it
// with the function that stops it (benchmarks use it; tests use
// StartDocker).
func ServeDocker(dir string) (*Docker, func(), error) {
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	var logs []string
	for attempt := range 3 {
		addr, err := freeAddr()
		if err != nil {
			return nil, nil, err
		}
		cfg := filepath.Join(dir, fmt.Sprintf("config-%d.yml", attempt))
		conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			return nil, nil, err
		}
		stop, log, err := serve(bin, cfg, addr)
		if err != nil {
			return nil, nil, err
		}
		if stop != nil {
			return &Docker{Host: addr, Storage: filepath.Join(dir, "data")}, stop, nil
		}
		logs = append(logs, log)
	}
	return nil, nil, fmt.Errorf("docker-registry did not start: %s", strings.Join(logs, "; "))
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// serve starts docker-registry with cfg and waits (10 s at most) for
// addr to answer /v2/; it returns how to stop it, or nil and the
// registry's output when it did not come up (the port was taken?).
func serve(bin, cfg, addr string) (func(), string, error) {
	cmd := exec.Command(bin, "serve", cfg)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting docker-registry: %w", err)
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
			return nil, out.String(), nil
		default:
		}
		if resp, err := client.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, "", nil
			}
		}
	}
	stop()
	return nil, out.String(), nil
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
