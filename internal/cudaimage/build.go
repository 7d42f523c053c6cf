package cudaimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuattest/gpuattest/internal/flock"
)

// Recipe is what goes into the image. Its JSON form, together with the
// installed versions of HostPackages, is hashed into the cache key.
type Recipe struct {
	// Version changes whenever the build logic changes.
	Version int `json:"version"`
	// Suite and Mirror are debootstrap's suite and mirror.
	Suite  string `json:"suite"`
	Mirror string `json:"mirror"`
	// Include are extra Debian packages debootstrap installs.
	Include []string `json:"include"`
	// HostPackages are installed Debian packages whose files are copied
	// from this machine into the root file system.
	HostPackages []string `json:"hostPackages"`
	// Exclude are regular expressions; a copied file whose path matches
	// one is left out.
	Exclude []string `json:"exclude"`
	// Keep are regular expressions overriding Exclude.
	Keep []string `json:"keep"`
}

// DefaultRecipe is the CUDA 11.8 build image: bookworm minbase, g++-11 and
// Debian's nvidia-cuda-toolkit without the math libraries.
var DefaultRecipe = Recipe{
	Version: 1,
	Suite:   "bookworm",
	Mirror:  "http://deb.debian.org/debian",
	Include: []string{"g++-11"},
	HostPackages: []string{
		"nvidia-cuda-toolkit", "nvidia-cuda-dev", "libnvvm4", "libcudart11.0",
		"libcu++-dev", "libcub-dev", "libthrust-dev",
	},
	Exclude: []string{
		`^/usr/share/(doc|man|lintian|bug)/`,
		`(cublas|cufft|cusolver|cusparse|curand|npp|nvjpeg|nvblas)`,
		`_static\.a$`,
	},
	Keep: []string{`/libcudart_static\.a$`},
}

// Layout is a built image in its cache.
type Layout struct {
	// Path is the OCI image layout directory.
	Path string
	// Image is the image in it.
	Image v1.Image
	// Built reports whether this call built it (false: it was cached).
	Built bool
	// Timings are the phases of the build, when Built.
	Timings map[string]time.Duration
}

// Key returns the cache key of r on this machine: a hash of the recipe and
// the installed versions of its host packages.
func (r Recipe) Key(ctx context.Context) (string, error) {
	versions, err := packageVersions(ctx, r.HostPackages)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(struct {
		Recipe   Recipe            `json:"recipe"`
		Versions map[string]string `json:"versions"`
	}{r, versions})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "cuda-build-" + hex.EncodeToString(sum[:8]), nil
}

// Build returns the image for r from cacheDir, building it first when it
// is not there. Concurrent callers (in other processes too) wait on a lock
// file instead of building twice. It needs root, debootstrap and the host
// packages installed.
func Build(ctx context.Context, cacheDir string, r Recipe, logger *slog.Logger) (*Layout, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	key, err := r.Key(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cache dir: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(cacheDir, key+".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	final := filepath.Join(cacheDir, key)
	if _, err := os.Stat(filepath.Join(final, "index.json")); err == nil {
		img, err := LoadLayout(final)
		if err != nil {
			return nil, fmt.Errorf("loading cached image %s: %w\nhint: remove %s to rebuild it", final, err, final)
		}
		return &Layout{Path: final, Image: img}, nil
	}

	tmp, err := os.MkdirTemp(cacheDir, key+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	timings := map[string]time.Duration{}
	phase := func(name string, start time.Time) {
		timings[name] = time.Since(start)
		logger.Info("cuda image build phase done", "phase", name, "took", timings[name].Round(time.Millisecond))
	}

	rootfs := filepath.Join(tmp, "rootfs")
	start := time.Now()
	args := []string{"--variant=minbase", "--include=" + strings.Join(r.Include, ","), r.Suite, rootfs, r.Mirror}
	if out, err := exec.CommandContext(ctx, "debootstrap", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("debootstrap %s: %w\n%s", strings.Join(args, " "), err, tail(out, 2000))
	}
	phase("debootstrap", start)

	start = time.Now()
	if err := copyHostPackages(ctx, rootfs, r); err != nil {
		return nil, err
	}
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "var/log/*.log", "var/log/apt/*"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, glob))
		for _, m := range matches {
			_ = os.RemoveAll(m)
		}
	}
	phase("copy toolkit", start)

	start = time.Now()
	layerPath := filepath.Join(tmp, "layer.tar.gz")
	if err := writeLayer(rootfs, layerPath); err != nil {
		return nil, err
	}
	phase("layer", start)

	start = time.Now()
	img, err := imageFromLayer(layerPath)
	if err != nil {
		return nil, err
	}
	lp := filepath.Join(tmp, "layout")
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("writing image layout: %w", err)
	}
	if err := p.AppendImage(img); err != nil {
		return nil, fmt.Errorf("writing image layout: %w", err)
	}
	if err := syncDir(lp); err != nil {
		return nil, err
	}
	if err := os.Rename(lp, final); err != nil {
		return nil, fmt.Errorf("moving image layout into the cache: %w", err)
	}
	phase("layout", start)
	img, err = LoadLayout(final)
	if err != nil {
		return nil, err
	}
	return &Layout{Path: final, Image: img, Built: true, Timings: timings}, nil
}

// LoadLayout returns the one image of the OCI layout at dir, as this
// package writes it (an index holding a single manifest).
func LoadLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("layout %s holds %d manifests, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

func imageFromLayer(layerPath string) (v1.Image, error) {
	layer, err := tarball.LayerFromFile(layerPath)
	if err != nil {
		return nil, fmt.Errorf("reading layer: %w", err)
	}
	cfg := &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
			Cmd:        []string{"/bin/bash"},
			WorkingDir: "/",
			Labels:     map[string]string{"org.opencontainers.image.title": "gpuattest test CUDA build image (nvcc 11.8, g++-11)"},
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: epoch},
		CreatedBy: "gpuattest internal/cudaimage: debootstrap + host CUDA toolkit files",
	}})
}

// packageVersions returns the installed version of each package, failing
// when one is not installed.
func packageVersions(ctx context.Context, pkgs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pkgs {
		b, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Abbrev}${Version}", p).Output()
		if err != nil || !bytes.HasPrefix(b, []byte("ii")) {
			return nil, fmt.Errorf("debian package %s is not installed\nhint: apt-get install nvidia-cuda-toolkit", p)
		}
		out[p] = strings.TrimSpace(string(b[3:]))
	}
	return out, nil
}

// copyHostPackages copies the files of r.HostPackages from / into rootfs,
// writing through an os.Root so that no symlink in rootfs can redirect a
// write outside it.
func copyHostPackages(ctx context.Context, rootfs string, r Recipe) error {
	var exclude, keep []*regexp.Regexp
	for _, e := range r.Exclude {
		exclude = append(exclude, regexp.MustCompile(e))
	}
	for _, k := range r.Keep {
		keep = append(keep, regexp.MustCompile(k))
	}
	skip := func(p string) bool {
		for _, k := range keep {
			if k.MatchString(p) {
				return false
			}
		}
		for _, e := range exclude {
			if e.MatchString(p) {
				return true
			}
		}
		return false
	}
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	seen := map[string]bool{}
	for _, pkg := range r.HostPackages {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-L", pkg).Output()
		if err != nil {
			return fmt.Errorf("listing files of %s: %w", pkg, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			p := sc.Text()
			if !strings.HasPrefix(p, "/") || p == "/." || seen[p] || skip(p) {
				continue
			}
			seen[p] = true
			if err := copyOne(root, p); err != nil {
				return fmt.Errorf("copying %s (package %s): %w", p, pkg, err)
			}
		}
	}
	return nil
}

func copyOne(root *os.Root, p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // listed by dpkg but removed by the admin (diverted, etc.)
	}
	if err != nil {
		return err
	}
	rel := strings.TrimPrefix(p, "/")
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return root.MkdirAll(rel, fi.Mode().Perm())
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if old, err := root.Lstat(rel); err == nil {
			if old.IsDir() {
				return nil // the image already has a directory here (merged /usr)
			}
			if err := root.Remove(rel); err != nil {
				return err
			}
		}
		return root.Symlink(target, rel)
	case fi.Mode().IsRegular():
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(dst, src); err != nil {
			dst.Close()
			return err
		}
		if err := dst.Close(); err != nil {
			return err
		}
		return root.Chmod(rel, fi.Mode().Perm())
	}
	return nil
}

// epoch is the modification time of every entry in the layer, so that the
// same recipe on the same packages gives the same layer bytes.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// writeLayer writes rootfs as a gzip tar (sorted, owner root, clamped
// times, hard links kept, device nodes, sockets and pipes left out).
func writeLayer(rootfs, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, err := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}
	err = filepath.WalkDir(rootfs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(rootfs, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			return nil
		}
		var link string
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if st, ok := statOf(fi); ok {
			if st.uid != 0 || st.gid != 0 {
				hdr.Uid, hdr.Gid = st.uid, st.gid
			}
			if mode.IsRegular() && st.nlink > 1 {
				k := inode{st.dev, st.ino}
				if first, ok := links[k]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					links[k] = hdr.Name
				}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing layer from %s: %w", rootfs, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Sync()
}

// syncDir fsyncs every file under dir, so that the rename that publishes it
// never exposes a half-written layout after a crash.
func syncDir(dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(paths))) // files before their dirs
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
