//go:build unix

package oci_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/registrytest"
)

// TestBundleCacheFIFO (issue 30, item 10): a FIFO, a directory or a
// link to a device planted in the bundle cache under a bundle's digest
// is not waited on or read: verify fetches the bundle from the registry,
// verifies, and the planted entry is replaced by the bundle.
func TestBundleCacheFIFO(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, 100)
	host := registrytest.StartInProcess(t, nil)
	if _, err := oci.Push(ctx(t), host+"/r:v1", f.rel, f.bundles); err != nil {
		t.Fatal(err)
	}
	plants := []struct {
		name  string
		plant func(path string) error
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"empty directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	}
	for _, pl := range plants {
		t.Run(pl.name, func(t *testing.T) {
			dir := t.TempDir()
			cache, err := oci.OpenBundleCache(dir, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			cached := filepath.Join(dir, "sha256", sha256hex(f.bundles[0].Data))
			if err := pl.plant(cached); err != nil {
				t.Fatal(err)
			}
			// Whatever happens, a writer releases an open(2) blocked on
			// the FIFO when the test ends.
			t.Cleanup(func() {
				if w, err := os.OpenFile(cached, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
			})
			type verified struct {
				res *oci.Result
				err error
			}
			done := make(chan verified, 1)
			go func() {
				res, err := oci.Verify(ctx(t), f.verifier(t), host+"/r:v1", oci.WithBundleCache(cache))
				done <- verified{res, err}
			}()
			select {
			case v := <-done:
				if v.err != nil || !v.res.Report.Verified {
					t.Fatalf("verify with a %s in the cache: %v %v", pl.name, v.err, v.res)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("verify with a %s in the bundle cache did not return in 30 s", pl.name)
			}
			if got, err := os.ReadFile(cached); err != nil || !bytes.Equal(got, f.bundles[0].Data) {
				t.Errorf("the cache entry after verify: %v (the bundle: %v)", err, bytes.Equal(got, f.bundles[0].Data))
			}
		})
	}
}
