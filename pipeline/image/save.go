package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteDockerArchive writes the pinned image p to w as an untagged
// docker-archive stream, what `docker load` reads, and returns its config
// digest (the image ID the engine will give it). The source is read and
// checked first (PullPinned). The stream names no repository or tag, so
// loading it creates no tag and moves none.
//
// An oci-layout (or registry) image is written with its compressed layer
// blobs as they are. A docker-archive is copied entry by entry, layers
// untouched, with a manifest.json that keeps its one image and drops its
// RepoTags, and without the files that would tag it on load (repositories,
// index.json, oci-layout).
func WriteDockerArchive(ctx context.Context, p Pinned, w io.Writer, opts ...Option) (string, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return "", err
	}
	img, res, err := PullPinned(ctx, p, opts...)
	if err != nil {
		return "", err
	}
	start := time.Now()
	switch p.Source.Kind {
	case DockerArchive:
		err = copyArchiveUntagged(o.absPath(p.Source.Path), w)
	default:
		// A digest reference puts no RepoTags in manifest.json.
		var ref name.Digest
		if ref, err = name.NewDigest("gpuattest.invalid/untagged@" + p.ManifestDigest()); err == nil {
			err = tarball.Write(ref, img, w)
		}
	}
	if err != nil {
		return "", fmt.Errorf("writing %s as a docker archive: %w", p.String(), err)
	}
	o.logger.Debug("wrote docker archive", "image", p.String(), "config", res.ConfigDigest, "took", time.Since(start).Round(time.Millisecond))
	return res.ConfigDigest, nil
}

// archiveTagFiles are the entries of a docker archive that name
// repositories or tags.
var archiveTagFiles = map[string]bool{"manifest.json": true, "repositories": true, "index.json": true, "oci-layout": true}

// copyArchiveUntagged copies the docker archive at file to w without its
// tags; it must hold exactly one image.
func copyArchiveUntagged(file string, w io.Writer) error {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	if len(m) != 1 {
		return fmt.Errorf("%s holds %d images, not 1\nhint: save one image per archive (docker save -o FILE REF)", file, len(m))
	}
	d := m[0]
	d.RepoTags = nil
	mb, err := json.Marshal(tarball.Manifest{d})
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", file, err)
		}
		if archiveTagFiles[path.Clean(hdr.Name)] {
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("reading %s: %w", file, err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "manifest.json", Mode: 0o644, Size: int64(len(mb))}); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	return tw.Close()
}
