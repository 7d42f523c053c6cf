package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpuattest/gpuattest/internal/flock"
)

// ErrUnsafeEntry reports a layer entry Extract refuses: a path that is
// absolute or has a ".." element, a symlink or hardlink whose target leaves
// the root, a device node, or an unknown entry type.
var ErrUnsafeEntry = errors.New("unsafe layer entry")

// DefaultCacheDir returns gpuattest's cache directory,
// $XDG_CACHE_HOME/gpuattest (~/.cache/gpuattest when XDG_CACHE_HOME is unset):
// the engine's build cache (keys/, objects/) and the extracted root file
// systems (rootfs/) share it. With neither variable set it is an error,
// never a shared temporary directory, where anyone could plant entries.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache directory: %w\nhint: set XDG_CACHE_HOME", err)
	}
	return filepath.Join(d, "gpuattest"), nil
}

// RootfsDir returns where Extract puts an image whose config digest is
// configDigest ("sha256:<hex>"): CACHEDIR/rootfs/<hex>.
func RootfsDir(cacheDir, configDigest string) string {
	_, hexDigest, _ := strings.Cut(configDigest, ":")
	return filepath.Join(cacheDir, "rootfs", hexDigest)
}

// Extract flattens img's layers, in order and honouring whiteouts, into
// CACHEDIR/rootfs/<hex of the config digest>/ and returns that directory.
// The config digest names the file system exactly: it lists every layer's
// uncompressed digest, and each layer is checked against it while it is
// extracted.
//
// Extraction is done in a temporary directory beside the final one, which is
// renamed into place only when complete and synced, so a crash never leaves
// a partial root file system under the final name; leftovers of a crashed
// extraction are removed by the next one. Concurrent extractions of one image
// (goroutines or processes) wait for each other through a lock file. When
// the directory exists already, Extract returns it at once.
//
// Every write goes through an os.Root opened on the temporary directory, and
// entries that could reach outside it are refused with ErrUnsafeEntry:
// absolute names, names with "..", symlinks whose relative target climbs out
// of the root, hardlinks to names outside it, and character or block
// devices. Absolute symlink targets are kept: inside the container they name
// files of the image, and Extract itself never follows them. FIFOs are
// skipped; setuid and setgid bits are dropped; owners are not restored (the
// files belong to the user running gpuattest).
func Extract(ctx context.Context, img v1.Image, cacheDir string, opts ...Option) (string, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return "", err
	}
	if cacheDir == "" {
		return "", errors.New("extracting image: empty cache directory")
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return "", fmt.Errorf("extracting image: reading config: %w", err)
	}
	sum := sha256.Sum256(raw)
	key := hex.EncodeToString(sum[:])
	base := filepath.Join(cacheDir, "rootfs")
	final := filepath.Join(base, key)
	if isDir(final) {
		return final, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("extracting image: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(base, "."+key+".lock"))
	if err != nil {
		return "", fmt.Errorf("extracting image sha256:%s: %w", key, err)
	}
	defer unlock()
	if isDir(final) { // another process finished while we waited
		return final, nil
	}
	// We hold the lock: any temporary directory of this image is a leftover
	// of a crashed extraction.
	if err := cleanLeftovers(base, key, o); err != nil {
		return "", fmt.Errorf("extracting image sha256:%s: removing a leftover extraction: %w", key, err)
	}
	tmp, err := os.MkdirTemp(base, tmpPrefix(key))
	if err != nil {
		return "", fmt.Errorf("extracting image: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = forceRemoveAll(tmp)
		}
	}()
	start := time.Now()
	n, err := extractLayers(ctx, img, raw, tmp, o)
	if err != nil {
		if errors.Is(err, ErrUnsafeEntry) {
			err = fmt.Errorf("%w\nhint: the image carries an entry that could write outside its root file system; rebuild it with a standard tool (docker build, buildah) or use another image", err)
		}
		return "", fmt.Errorf("extracting image sha256:%s: %w", key, err)
	}
	if err := syncFSHook(tmp); err != nil {
		return "", fmt.Errorf("extracting image sha256:%s: syncing: %w", key, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("extracting image sha256:%s: %w", key, err)
	}
	done = true
	if err := syncDir(base); err != nil {
		return "", fmt.Errorf("extracting image sha256:%s: syncing %s: %w", key, base, err)
	}
	o.logger.Info("extracted image", "config", "sha256:"+key, "rootfs", final, "entries", n, "took", time.Since(start).Round(time.Millisecond))
	return final, nil
}

func tmpPrefix(key string) string { return ".tmp-" + key + "-" }

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

func cleanLeftovers(base, key string, o *options) error {
	ents, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix(key)) {
			p := filepath.Join(base, e.Name())
			o.logger.Warn("removing a leftover of an interrupted extraction", "dir", p)
			if err := forceRemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// forceRemoveAll removes p even when the image made directories read-only.
func forceRemoveAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// extractor applies layers to a root directory.
type extractor struct {
	root *os.Root
	o    *options
	// dirModes holds the modes of directories, applied at the end so that a
	// read-only directory can still be filled by later entries and layers.
	dirModes map[string]fs.FileMode
	// dirs caches directories known to exist (made or checked by us), so
	// that most entries skip MkdirAll; forget drops what a removal voids.
	dirs map[string]bool
	// parents caches open handles of directories that entries are created
	// in, so that creating a/b/c/file is one openat beside a/b/c instead of
	// a walk of every component (os.Root opens each one). Any removal
	// drops them all: a removed directory, or one reached through a symlink
	// that a removal changed, must not be written into.
	parents map[string]*os.Root
	entries int
	// viaUncompressed reads layers through Uncompressed (see openLayer).
	viaUncompressed bool
	// buf is the copy buffer of file contents.
	buf []byte
}

// forget drops name and everything under it from the directory cache,
// and every cached directory handle.
func (x *extractor) forget(name string) {
	x.closeParents()
	delete(x.dirs, name)
	prefix := name + "/"
	for d := range x.dirs {
		if strings.HasPrefix(d, prefix) {
			delete(x.dirs, d)
		}
	}
}

// maxParents bounds the directory handles kept open.
const maxParents = 64

// parentOf makes name's parent directory and returns a handle on it, and
// name's last element.
func (x *extractor) parentOf(name string) (*os.Root, string, error) {
	if err := x.parent(name); err != nil {
		return nil, "", err
	}
	dir, base := path.Split(name)
	if dir == "" {
		return x.root, base, nil
	}
	dir = strings.TrimSuffix(dir, "/")
	if r := x.parents[dir]; r != nil {
		return r, base, nil
	}
	if len(x.parents) >= maxParents {
		x.closeParents()
	}
	r, err := x.root.OpenRoot(dir)
	if err != nil {
		return nil, "", err
	}
	x.parents[dir] = r
	return r, base, nil
}

func (x *extractor) closeParents() {
	for d, r := range x.parents {
		r.Close()
		delete(x.parents, d)
	}
}

func (x *extractor) remove(name string, all bool) error {
	x.forget(name)
	if all {
		return x.root.RemoveAll(name)
	}
	return x.root.Remove(name)
}

// extractLayers applies img's layers to dir, checking each against the
// uncompressed digest that rawConfig (the config whose digest names the
// root file system) lists for it. The digests come from the config itself,
// never from the layer: go-containerregistry works out an OCI layout
// layer's DiffID by decompressing the whole layer once more.
func extractLayers(ctx context.Context, img v1.Image, rawConfig []byte, dir string, o *options) (int, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, fmt.Errorf("listing layers: %w", err)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return 0, fmt.Errorf("parsing the image config: %w", err)
	}
	if len(cf.RootFS.DiffIDs) != len(layers) {
		return 0, fmt.Errorf("the image has %d layers but its config lists %d layer digests (rootfs.diff_ids)\nhint: the image is malformed; rebuild it", len(layers), len(cf.RootFS.DiffIDs))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	_, via := img.(uncompressedPreferrer)
	x := &extractor{root: root, o: o, dirModes: map[string]fs.FileMode{".": 0o755}, dirs: map[string]bool{".": true}, viaUncompressed: via, buf: make([]byte, 256<<10), parents: map[string]*os.Root{}}
	defer x.closeParents()
	for i, l := range layers {
		if err := x.layer(ctx, i, l, cf.RootFS.DiffIDs[i]); err != nil {
			return x.entries, err
		}
	}
	return x.entries, x.finish()
}

func (x *extractor) layer(ctx context.Context, i int, l v1.Layer, diffID v1.Hash) error {
	rc, err := openLayer(l, x.viaUncompressed)
	if err != nil {
		return fmt.Errorf("layer %d (%s): %w", i, diffID, err)
	}
	s := newLayerStream(rc)
	defer s.Close(rc.Close)
	tr := tar.NewReader(s)
	created := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("layer %d (%s): reading tar: %w", i, diffID, err)
		}
		if err := escapeErr(x.entry(hdr, tr, created)); err != nil {
			return fmt.Errorf("layer %d (%s): entry %q: %w", i, diffID, hdr.Name, err)
		}
		x.entries++
	}
	return checkDigest(i, diffID, s)
}

// checkDigest reads the rest of the stream (tar padding) and compares the
// uncompressed digest with the one the config lists.
func checkDigest(i int, want v1.Hash, s *layerStream) error {
	got, err := s.Digest()
	if err != nil {
		return fmt.Errorf("layer %d (%s): %w", i, want, err)
	}
	if want.Algorithm != "sha256" {
		return fmt.Errorf("layer %d: the image config lists its digest as %s, want a sha256 digest\nhint: only sha256 layer digests can be verified", i, want)
	}
	if got != want.String() {
		return fmt.Errorf("layer %d: uncompressed content hashes to %s, but the image config says %s\nhint: the image source is corrupt or was tampered with", i, got, want)
	}
	return nil
}

// escapeErr marks os.Root's refusals (a path resolving through a symlink
// outside the root) as unsafe entries.
func escapeErr(err error) error {
	if err != nil && !errors.Is(err, ErrUnsafeEntry) && strings.Contains(err.Error(), "path escapes from parent") {
		return unsafef("path resolves through a symlink that leaves the extraction root (%v)", err)
	}
	return err
}

func unsafef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsafeEntry}, args...)...)
}

// cleanName checks a tar entry name and returns it relative to the root
// ("" for the root itself), or why it is refused.
func cleanName(n string) (string, string) {
	if strings.HasPrefix(n, "/") {
		return "", "absolute path"
	}
	for _, e := range strings.Split(n, "/") {
		if e == ".." {
			return "", "path has a \"..\" element"
		}
	}
	c := path.Clean(n)
	if c == "." {
		return "", ""
	}
	return c, ""
}

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

func (x *extractor) entry(hdr *tar.Header, r io.Reader, created map[string]bool) error {
	name, why := cleanName(hdr.Name)
	if why != "" {
		return unsafef("%s", why)
	}
	dir, base := path.Split(name)
	dir = path.Clean("./" + dir)
	switch {
	case base == opaqueMarker:
		return x.opaque(dir, created)
	case strings.HasPrefix(base, whiteoutPrefix):
		target := strings.TrimPrefix(base, whiteoutPrefix)
		if target == "" || target == "." {
			return unsafef("whiteout names nothing")
		}
		return x.whiteout(path.Join(dir, target))
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			x.dirModes["."] = dirMode(hdr)
		}
		return nil
	}
	markCreated(created, name)
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.mkdir(name, hdr)
	case tar.TypeReg:
		return x.file(name, hdr, r)
	case tar.TypeSymlink:
		return x.symlink(name, hdr)
	case tar.TypeLink:
		return x.hardlink(name, hdr)
	case tar.TypeChar, tar.TypeBlock:
		return unsafef("device node (%d:%d); images must not carry device nodes", hdr.Devmajor, hdr.Devminor)
	case tar.TypeFifo:
		x.o.logger.Debug("skipping a FIFO in an image layer", "name", name)
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return unsafef("unsupported tar entry type %q", string(hdr.Typeflag))
	}
}

func markCreated(created map[string]bool, name string) {
	for p := name; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if created[p] {
			return
		}
		created[p] = true
	}
}

func dirMode(hdr *tar.Header) fs.FileMode {
	return fs.FileMode(hdr.Mode) & (fs.ModePerm) // setuid/setgid/sticky dropped on directories
}

func fileMode(hdr *tar.Header) fs.FileMode {
	return fs.FileMode(hdr.Mode) & fs.ModePerm // setuid and setgid dropped
}

// parent makes the parent directory of name unless it is known to exist.
func (x *extractor) parent(name string) error {
	parent := path.Dir(name)
	if x.dirs[parent] {
		return nil
	}
	if err := x.root.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("making parent directory: %w", err)
	}
	for d := parent; d != "."; d = path.Dir(d) {
		x.dirs[d] = true
	}
	return nil
}

// clear removes whatever name is now, unless it is a directory and keepDir
// is set. It reports whether a directory is kept.
func (x *extractor) clear(name string, keepDir bool) (bool, error) {
	fi, err := x.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.IsDir() {
		if keepDir {
			return true, nil
		}
		return false, x.remove(name, true)
	}
	// Never write through what is there: a hardlink shares its bytes with
	// another name, a symlink points elsewhere.
	return false, x.remove(name, false)
}

// create makes name's parent and runs mk, which creates name (base in
// dir, name's parent directory) exclusively
// (O_EXCL, mkdir, symlink, link: never through what is there). When name
// exists already, which is rare but for later layers, it clears it and runs
// mk again: one system call per entry in the common case, not a stat
// first.
func (x *extractor) create(name string, mk func(dir *os.Root, base string) error) error {
	dir, base, err := x.parentOf(name)
	if err != nil {
		return err
	}
	if err := mk(dir, base); !errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, err := x.clear(name, false); err != nil {
		return err
	}
	if dir, base, err = x.parentOf(name); err != nil { // clear dropped the handles
		return err
	}
	return mk(dir, base)
}

func (x *extractor) mkdir(name string, hdr *tar.Header) error {
	dir, base, err := x.parentOf(name)
	if err != nil {
		return err
	}
	err = dir.Mkdir(base, 0o700)
	if errors.Is(err, fs.ErrExist) {
		var kept bool
		if kept, err = x.clear(name, true); err == nil && !kept {
			err = x.root.Mkdir(name, 0o700)
		}
	}
	if err != nil {
		return err
	}
	x.dirs[name] = true
	x.dirModes[name] = dirMode(hdr)
	return nil
}

// writebackMin is the size from which a file's writeback is started as
// soon as it is written (see startWriteback).
const writebackMin = 64 << 10

// writerOnly hides *os.File's ReadFrom, so that io.CopyBuffer uses the
// extractor's buffer instead of allocating one per file.
type writerOnly struct{ io.Writer }

func (x *extractor) file(name string, hdr *tar.Header, r io.Reader) error {
	var f *os.File
	err := x.create(name, func(dir *os.Root, base string) (err error) {
		f, err = dir.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		return err
	})
	if err != nil {
		return err
	}
	n, err := io.CopyBuffer(writerOnly{f}, r, x.buf)
	if err != nil {
		f.Close()
		return err
	}
	if n >= writebackMin {
		startWriteback(f)
	}
	if err := f.Chmod(fileMode(hdr)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (x *extractor) symlink(name string, hdr *tar.Header) error {
	target := hdr.Linkname
	if target == "" {
		return unsafef("symlink with an empty target")
	}
	if !path.IsAbs(target) {
		if j := path.Join(path.Dir(name), target); j == ".." || strings.HasPrefix(j, "../") {
			return unsafef("symlink target %q leaves the image root", target)
		}
	}
	return x.create(name, func(dir *os.Root, base string) error { return dir.Symlink(target, base) })
}

func (x *extractor) hardlink(name string, hdr *tar.Header) error {
	if hdr.Linkname == "" {
		return unsafef("hardlink with an empty target")
	}
	target, why := cleanName(hdr.Linkname)
	if why != "" {
		return unsafef("hardlink target %q: %s", hdr.Linkname, why)
	}
	if target == "" {
		return unsafef("hardlink to the image root")
	}
	fi, err := x.root.Lstat(target)
	if err != nil {
		return fmt.Errorf("hardlink target %q: %w", hdr.Linkname, err)
	}
	if fi.IsDir() {
		return unsafef("hardlink to directory %q", hdr.Linkname)
	}
	if target == name {
		return nil
	}
	return x.create(name, func(*os.Root, string) error { return x.root.Link(target, name) })
}

func (x *extractor) whiteout(name string) error {
	if err := x.remove(name, true); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("applying whiteout: %w", err)
	}
	return nil
}

// opaque removes everything under dir that lower layers put there, keeping
// what this layer created so far.
func (x *extractor) opaque(dir string, created map[string]bool) error {
	f, err := x.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying opaque whiteout: %w", err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("applying opaque whiteout: %w", err)
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !created[p] {
			if err := x.remove(p, true); err != nil {
				return fmt.Errorf("applying opaque whiteout: %w", err)
			}
			continue
		}
		if fi, err := x.root.Lstat(p); err == nil && fi.IsDir() {
			if err := x.opaque(p, created); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish applies directory modes, deepest first.
func (x *extractor) finish() error {
	names := make([]string, 0, len(x.dirModes))
	for n := range x.dirModes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return strings.Count(names[i], "/") > strings.Count(names[j], "/") || (strings.Count(names[i], "/") == strings.Count(names[j], "/") && names[i] > names[j])
	})
	for _, n := range names {
		fi, err := x.root.Lstat(n)
		if err != nil || !fi.IsDir() {
			continue // removed or replaced by a later layer
		}
		if err := x.root.Chmod(n, x.dirModes[n]); err != nil {
			return fmt.Errorf("setting the mode of %q: %w", n, err)
		}
	}
	return nil
}

// syncFSHook is syncFS; the extraction benchmark swaps it to measure the
// cost of making the rootfs durable.
var syncFSHook = syncFS
