package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/image"
)

// loadFile makes the engine hold the image of a file source (oci-layout:
// or docker-archive:, for machines without registry access) and returns
// its image ID, sha256:<config digest>: the only name the container is run
// by. When the engine already has an image with the pinned config digest
// as its ID, that is the image (the ID is the digest of a config that
// lists every layer's digest), and the file is not read. Otherwise the file
// is checked against the pinned digests and piped into `docker load` as an
// untagged docker archive (image.WriteDockerArchive), so no tag is created
// or moved, and the loaded image's ID must be the config digest.
func (d *Docker) loadFile(ctx context.Context, p image.Pinned) (string, error) {
	d.loadMu.Lock()
	defer d.loadMu.Unlock()
	if id, ok := d.loaded[p.String()]; ok {
		return id, nil
	}
	id := p.ConfigDigest
	if id == "" || !d.hasImageID(ctx, id) {
		start := time.Now()
		got, err := d.load(ctx, p)
		if err != nil {
			return "", err
		}
		if id != "" && got != id {
			return "", fmt.Errorf("docker runner: %s holds image %s, not the pinned %s", p.String(), got, id)
		}
		id = got
		if !d.hasImageID(ctx, id) {
			return "", fmt.Errorf("docker runner: after docker load of %s the engine has no image with ID %s\nhint: the engine names images otherwise (the containerd image store names them by manifest digest); use runner: bwrap for file sources there", p.String(), id)
		}
		d.logger.Info("loaded image", "image", p.String(), "id", id, "took", time.Since(start).Round(time.Millisecond))
	}
	if d.loaded == nil {
		d.loaded = map[string]string{}
	}
	d.loaded[p.String()] = id
	return id, nil
}

// load streams the pinned file image into `docker load` and returns the
// config digest of what it streamed, once the engine reports loading
// exactly that image ID.
func (d *Docker) load(ctx context.Context, p image.Pinned) (string, error) {
	d.logger.Info("loading image into the docker engine", "image", p.String())
	pr, pw := io.Pipe()
	type written struct {
		config string
		err    error
	}
	done := make(chan written, 1)
	go func() {
		c, err := image.WriteDockerArchive(ctx, p, pw, image.WithLogger(d.logger))
		pw.CloseWithError(err)
		done <- written{c, err}
	}()
	out, err := d.cli(ctx, pr, "load", "--quiet")
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if docker stopped reading
	wr := <-done
	if wr.err != nil {
		return "", fmt.Errorf("docker runner: loading %s: %w", p.String(), wr.err)
	}
	if err != nil {
		return "", fmt.Errorf("docker runner: docker load of %s: %w: %s", p.String(), err, strings.TrimSpace(lastLines(string(out), 5)))
	}
	loaded := loadedIDs(out)
	if len(loaded) != 1 || loaded[0] != wr.config {
		return "", fmt.Errorf("docker runner: docker load of %s reported %q, want exactly the image ID %s", p.String(), strings.TrimSpace(string(out)), wr.config)
	}
	return wr.config, nil
}

// loadedIDs returns the image IDs in `docker load` output ("Loaded image
// ID: sha256:...", one line per untagged image).
func loadedIDs(out []byte) []string {
	var ids []string
	for _, l := range bytes.Split(out, []byte("\n")) {
		if id, ok := bytes.CutPrefix(bytes.TrimSpace(l), []byte("Loaded image ID: ")); ok {
			ids = append(ids, string(id))
		}
	}
	return ids
}

// hasImageID reports whether the engine has an image whose ID is id
// (sha256:<hex>).
func (d *Docker) hasImageID(ctx context.Context, id string) bool {
	out, err := d.cli(ctx, nil, "image", "inspect", "--format", "{{.Id}}", id)
	return err == nil && strings.TrimSpace(string(out)) == id
}
