package image

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestUnpackWorksOfflineOnceUnpacked(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	up.Store(true)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			// 404, not 503: go-containerregistry retries 5xx with back-off.
			http.Error(w, "registry down (simulated)", http.StatusNotFound)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	img, err := mutate.Config(platformImage(t, "linux", "amd64"), v1.Config{Env: []string{"PATH=/usr/bin", "CUDA=11.8"}})
	if err != nil {
		t.Fatal(err)
	}
	d := push(t, host+"/cuda:1", img)
	cache := t.TempDir()
	src := host + "/cuda@" + d.String()

	first, err := Unpack(t.Context(), src, cache)
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached || first.Config.Config.Env[1] != "CUDA=11.8" {
		t.Errorf("first Unpack = %+v", first)
	}
	if b, _ := os.ReadFile(filepath.Join(first.Rootfs, "platform")); string(b) != "linux/amd64" {
		t.Errorf("rootfs /platform = %q", b)
	}

	up.Store(false) // the registry goes away (a resumed run on another network)
	second, err := Unpack(t.Context(), src, cache)
	if err != nil {
		t.Fatalf("Unpack with the registry down: %v", err)
	}
	if !second.Cached || second.Rootfs != first.Rootfs || second.ConfigDigest != first.ConfigDigest {
		t.Errorf("second Unpack = %+v, want the cached %+v", second, first)
	}

	// A tampered memo (pointing at no extracted rootfs) is not trusted.
	memos, _ := filepath.Glob(filepath.Join(cache, "rootfs", ".pinned", "*.json"))
	if len(memos) != 1 {
		t.Fatalf("memos: %v", memos)
	}
	if err := os.WriteFile(memos[0], []byte(`{"architecture":"amd64","os":"linux"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Unpack(t.Context(), src, cache); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Unpack with a tampered memo and the registry down: %v, want it to ask the registry", err)
	}

	if _, err := Unpack(t.Context(), host+"/cuda:1", cache); err == nil || !strings.Contains(err.Error(), "not pinned by digest") {
		t.Errorf("Unpack of a tag: %v", err)
	}
}
