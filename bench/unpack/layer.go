package main

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"

	"github.com/gpuattest/gpuattest/internal/cudaimage"
)

// errFull stops the walk once the layer is big enough.
var errFull = errors.New("layer full")

// parseSize reads "500MB", "1GiB" or a plain byte count.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v <= 0 {
				break
			}
			return int64(v * float64(u.mult)), nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("-size %q: expected a positive size such as 500MB or 1GiB", s)
	}
	return v, nil
}

// generatedImage returns a one-layer image of about size bytes of the files
// under srcs, kept as an OCI layout in work so that later runs reuse it.
func generatedImage(work string, srcs []string, size int64) (v1.Image, string, error) {
	sum := sha256.Sum256([]byte(fmt.Sprint(srcs, size)))
	key := hex.EncodeToString(sum[:6])
	lp := filepath.Join(work, "gen-"+key+"-layout")
	what := fmt.Sprintf("a generated layer of %.0f MB of files from %s", float64(size)/1e6, strings.Join(srcs, ", "))
	if _, err := os.Stat(filepath.Join(lp, "index.json")); err == nil {
		img, err := cudaimage.LoadLayout(lp)
		return img, what, err
	}
	blob := filepath.Join(work, "gen-"+key+".tar.gz")
	if err := writeTree(blob, srcs, size); err != nil {
		return nil, "", fmt.Errorf("generating the layer: %w", err)
	}
	l, err := tarball.LayerFromFile(blob)
	if err != nil {
		return nil, "", err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, "", err
	}
	_ = os.RemoveAll(lp)
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		return nil, "", err
	}
	if err := p.AppendImage(img); err != nil {
		return nil, "", err
	}
	_ = os.Remove(blob)
	img, err = cudaimage.LoadLayout(lp)
	return img, what, err
}

// writeTree writes a gzip tar of the directories, regular files and
// symlinks under srcs (names without the leading "/"), stopping once the
// regular files reach size bytes.
func writeTree(out string, srcs []string, size int64) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw := gzip.NewWriter(bw)
	tw := tar.NewWriter(zw)
	seen := map[string]bool{}
	var total int64
	for _, src := range srcs {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || seen[p] {
				return nil // unreadable: skip
			}
			if total >= size {
				return errFull
			}
			seen[p] = true
			n, err := addEntry(tw, p, d)
			total += n
			return err
		})
		if err != nil && !errors.Is(err, errFull) {
			return err
		}
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
	return f.Close()
}

func addEntry(tw *tar.Writer, p string, d fs.DirEntry) (int64, error) {
	fi, err := d.Info()
	if err != nil {
		return 0, nil
	}
	link := ""
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		if link, err = os.Readlink(p); err != nil {
			return 0, nil
		}
	case fi.IsDir(), fi.Mode().IsRegular():
	default:
		return 0, nil // devices, sockets, FIFOs
	}
	var r *os.File
	if fi.Mode().IsRegular() {
		if r, err = os.Open(p); err != nil {
			return 0, nil
		}
		defer r.Close()
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return 0, err
	}
	h.Name = strings.TrimPrefix(p, "/")
	if fi.IsDir() {
		h.Name += "/"
	}
	h.Uname, h.Gname, h.Format = "", "", tar.FormatPAX
	if err := tw.WriteHeader(h); err != nil {
		return 0, err
	}
	if r == nil {
		return 0, nil
	}
	return io.Copy(tw, r)
}

// writeBlob copies l's compressed blob to p.
func writeBlob(l v1.Layer, p string) error {
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
