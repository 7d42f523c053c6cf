package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
)

// Unpacked is an image's root file system in the cache, with its config.
type Unpacked struct {
	// Rootfs is the extracted root file system (see Extract).
	Rootfs string
	// Config is the image config (Env, WorkingDir, User, ...).
	Config *v1.ConfigFile
	// ConfigDigest is the config's digest, which names Rootfs.
	ConfigDigest string
	// Cached is true when nothing had to be fetched: the source's digest
	// was unpacked before, so not even the registry was asked.
	Cached bool
}

// Unpack pulls a digest-pinned source and extracts it into
// CACHEDIR/rootfs/ (Pull then Extract), remembering which config the
// pinned digest and platform lead to. A later Unpack of the same pinned
// source finds the root file system without asking the source, so a
// resumed run works without the registry. The remembered config is
// verified against the digest that names the root file system; a
// floating source is refused.
func Unpack(ctx context.Context, src, cacheDir string, opts ...Option) (*Unpacked, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	s, err := ParseSource(src)
	if err != nil {
		return nil, err
	}
	if s.Floating() {
		return nil, fmt.Errorf("unpacking image %q: not pinned by digest\nhint: use NAME@sha256:<digest> (gpuattest lock resolves tags to digests)", src)
	}
	memo := filepath.Join(cacheDir, "rootfs", ".pinned", memoName(s, o.platform))
	if u, ok := fromMemo(memo, cacheDir); ok {
		o.logger.Debug("image already unpacked", "reference", src, "rootfs", u.Rootfs)
		return u, nil
	}
	img, _, err := Pull(ctx, src, opts...)
	if err != nil {
		return nil, err
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("unpacking image %q: reading config: %w", src, err)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("unpacking image %q: parsing config: %w", src, err)
	}
	rootfs, err := Extract(ctx, img, cacheDir, opts...)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(memo), 0o755); err != nil {
		return nil, fmt.Errorf("unpacking image %q: %w", src, err)
	}
	if err := atomicfile.Write(memo, raw, 0o644); err != nil {
		return nil, fmt.Errorf("unpacking image %q: %w", src, err)
	}
	sum := sha256.Sum256(raw)
	return &Unpacked{Rootfs: rootfs, Config: cf, ConfigDigest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// memoName names the memo of a pinned source for a platform: the kind, the
// digest and the platform (an index digest leads to one manifest per
// platform). The repository or path is left out: the digest alone names
// the content.
func memoName(s Source, p v1.Platform) string {
	_, h, _ := strings.Cut(s.Digest, ":")
	plat := strings.NewReplacer("/", "_", ":", "_").Replace(p.String())
	return string(s.Kind) + "-" + h + "-" + plat + ".json"
}

func fromMemo(memo, cacheDir string) (*Unpacked, bool) {
	raw, err := os.ReadFile(memo)
	if err != nil {
		return nil, false
	}
	sum := sha256.Sum256(raw)
	d := "sha256:" + hex.EncodeToString(sum[:])
	rootfs := RootfsDir(cacheDir, d)
	if !isDir(rootfs) {
		return nil, false
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, false
	}
	return &Unpacked{Rootfs: rootfs, Config: cf, ConfigDigest: d, Cached: true}, true
}
