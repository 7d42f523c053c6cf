package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// DefaultBundleCacheSize is the most a bundle cache holds once trimmed.
const DefaultBundleCacheSize = 256 << 20

// BundleCache keeps Sigstore bundle blobs read from registries, by
// digest, in a directory (BundleCacheDir): a second verification of a
// release, or a history over mostly the same releases, reads a bundle
// it has read before from disk. Every file is hashed again when read
// and used only when it is the digest asked for (a file changed on
// disk is removed and the bundle fetched again); a bundle read from the
// cache is verified as one read from the registry. Each process writes
// at most its size, and Trim brings the directory back to it, oldest
// files first.
type BundleCache struct {
	dir     string
	max     int64
	written atomic.Int64
}

// BundleCacheDir is the default bundle cache directory:
// $XDG_CACHE_HOME/gpuattest/bundles (os.UserCacheDir).
func BundleCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "gpuattest", "bundles"), nil
}

// OpenBundleCache opens (creating it) the bundle cache in dir, bounded
// to max bytes.
func OpenBundleCache(dir string, max int64) (*BundleCache, error) {
	if max < 1 {
		return nil, fmt.Errorf("bundle cache size %d: expected 1 or more bytes", max)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	return &BundleCache{dir: dir, max: max}, nil
}

// WithBundleCache has Verify read and keep bundle blobs in c.
func WithBundleCache(c *BundleCache) Option {
	return func(o *options) error {
		if c == nil {
			return errors.New("bundle cache: nil")
		}
		o.bundles = c
		return nil
	}
}

func (c *BundleCache) path(h v1.Hash) string { return filepath.Join(c.dir, "sha256", h.Hex) }

// get returns the cached bundle h of size bytes, or nil when it is not
// there, ctx is done, or it is not (any more) that digest or not a
// regular file, in which case it is removed. The open does not wait: a
// FIFO planted in the cache is refused, not waited on for a writer that
// never comes (limits.Open), and the read stops when ctx is done.
func (c *BundleCache) get(ctx context.Context, h v1.Hash, size int64) []byte {
	if c == nil || h.Algorithm != "sha256" || !hexSHA256.MatchString(h.Hex) || size < 0 || ctx.Err() != nil {
		return nil
	}
	f, err := limits.Open(c.path(h), "cached bundle")
	if errors.Is(err, limits.ErrNotRegular) {
		_ = os.Remove(c.path(h))
	}
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(ctxReader{ctx, f}, size+1))
	if err != nil {
		return nil
	}
	if got, _, _ := v1.SHA256(bytes.NewReader(data)); got != h || int64(len(data)) != size {
		_ = os.Remove(c.path(h))
		return nil
	}
	now := time.Now()
	_ = os.Chtimes(c.path(h), now, now) // Trim keeps what is read
	return data
}

// put keeps data, which the caller hashed to h, unless this process
// has written the cache's size already. A failure to write only costs a
// fetch next time.
func (c *BundleCache) put(h v1.Hash, data []byte) {
	if c == nil || h.Algorithm != "sha256" || !hexSHA256.MatchString(h.Hex) || c.written.Add(int64(len(data))) > c.max {
		return
	}
	tmp, err := os.CreateTemp(filepath.Join(c.dir, "sha256"), ".tmp-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path(h))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
}

// Trim removes the oldest files (by modification time) until the cache
// holds at most its size, and any file left from a write that did not
// finish.
func (c *BundleCache) Trim() error {
	ents, err := os.ReadDir(filepath.Join(c.dir, "sha256"))
	if err != nil {
		return fmt.Errorf("bundle cache: %w", err)
	}
	type file struct {
		name string
		info os.FileInfo
	}
	var files []file
	var total int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		files = append(files, file{e.Name(), info})
		total += info.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].info.ModTime().Before(files[j].info.ModTime()) })
	for _, f := range files {
		if total <= c.max && hexSHA256.MatchString(f.name) {
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, "sha256", f.name)); err == nil {
			total -= f.info.Size()
		}
	}
	return nil
}
