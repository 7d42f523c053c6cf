package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// stage holds what Verify writes until it is verified: a directory of
// files and an OCI layout, each a hidden temporary directory beside its
// destination, renamed into place by commit or removed by discard. With
// no destination it writes nothing and layers are only hashed.
type stage struct {
	files, layout       string // destinations
	filesTmp, layoutTmp string
	filesRoot           *os.Root
	committed           bool
}

// newStage checks the destinations (each must not exist or be an empty
// directory, under an existing parent) and makes the temporary
// directories.
func newStage(files, layout string) (*stage, error) {
	s := &stage{files: files, layout: layout}
	var err error
	if files != "" {
		if s.filesTmp, err = tempBeside(files); err != nil {
			return nil, err
		}
		if s.filesRoot, err = os.OpenRoot(s.filesTmp); err != nil {
			s.discard()
			return nil, err
		}
	}
	if layout != "" {
		if s.layoutTmp, err = tempBeside(layout); err != nil {
			s.discard()
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(s.layoutTmp, "blobs", "sha256"), 0o755); err != nil {
			s.discard()
			return nil, err
		}
	}
	return s, nil
}

// tempBeside checks dest and makes a temporary directory beside it.
func tempBeside(dest string) (string, error) {
	entries, err := os.ReadDir(dest)
	switch {
	case err == nil && len(entries) > 0:
		return "", fmt.Errorf("%s exists and is not empty\nhint: pull writes into a new (or empty) directory, all at once", dest)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("checking %s: %w", dest, err)
	}
	dir, base := filepath.Split(filepath.Clean(dest))
	if dir == "" {
		dir = "."
	}
	tmp, err := os.MkdirTemp(dir, "."+base+".partial-")
	if err != nil {
		return "", fmt.Errorf("making a directory beside %s: %w", dest, err)
	}
	return tmp, os.Chmod(tmp, 0o755)
}

// layer copies r into the staged file name and the layout's blobs (where
// staged) and returns the sha256 and size of what was read.
func (s *stage) layer(ctx context.Context, name string, r io.Reader) (string, int64, error) {
	h := sha256.New()
	ws := []io.Writer{h}
	var outs []*os.File
	defer func() {
		for _, f := range outs {
			f.Close()
		}
	}()
	if s.filesRoot != nil {
		if err := s.filesRoot.MkdirAll(path.Dir(name), 0o755); err != nil {
			return "", 0, err
		}
		f, err := s.filesRoot.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return "", 0, err
		}
		outs, ws = append(outs, f), append(ws, &flushingWriter{f: f})
	}
	var blob *os.File
	if s.layoutTmp != "" {
		f, err := os.CreateTemp(filepath.Join(s.layoutTmp, "blobs", "sha256"), ".blob-")
		if err != nil {
			return "", 0, err
		}
		blob, outs, ws = f, append(outs, f), append(ws, &flushingWriter{f: f})
	}
	n, err := io.CopyBuffer(io.MultiWriter(ws...), ctxReader{ctx, r}, make([]byte, 1<<20))
	if err != nil {
		return "", n, err
	}
	for _, f := range outs {
		if err := f.Sync(); err != nil {
			return "", n, err
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if blob != nil {
		if err := os.Rename(blob.Name(), filepath.Join(s.layoutTmp, "blobs", "sha256", sum)); err != nil {
			return "", n, err
		}
	}
	return sum, n, nil
}

// blob stages a small blob of the layout (a manifest, a config, a
// bundle), named by its digest.
func (s *stage) blob(b []byte) error {
	if s.layoutTmp == "" {
		return nil
	}
	sum := sha256.Sum256(b)
	return writeSynced(filepath.Join(s.layoutTmp, "blobs", "sha256", hex.EncodeToString(sum[:])), b)
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, bytes.NewReader(b))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// commit writes the layout's oci-layout and index.json (listing
// manifests) and renames the staged directories into place; when the
// second rename fails the first is undone.
func (s *stage) commit(ctx context.Context, manifests []v1.Descriptor) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.layoutTmp != "" {
		idx, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: manifests})
		if err != nil {
			return err
		}
		if err := writeSynced(filepath.Join(s.layoutTmp, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
			return err
		}
		if err := writeSynced(filepath.Join(s.layoutTmp, "index.json"), idx); err != nil {
			return err
		}
	}
	if s.filesTmp != "" {
		s.filesRoot.Close()
		if err := os.Rename(s.filesTmp, s.files); err != nil {
			return fmt.Errorf("writing %s: %w", s.files, err)
		}
	}
	if s.layoutTmp != "" {
		if err := os.Rename(s.layoutTmp, s.layout); err != nil {
			if s.filesTmp != "" {
				_ = os.Rename(s.files, s.filesTmp)
			}
			return fmt.Errorf("writing %s: %w", s.layout, err)
		}
	}
	s.committed = true
	for _, d := range []string{s.files, s.layout} {
		if d != "" {
			syncDir(filepath.Dir(filepath.Clean(d)))
		}
	}
	return nil
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		f.Close()
	}
}

// discard removes whatever was staged and not committed.
func (s *stage) discard() {
	if s.committed {
		return
	}
	if s.filesRoot != nil {
		s.filesRoot.Close()
	}
	for _, d := range []string{s.filesTmp, s.layoutTmp} {
		if d != "" {
			_ = os.RemoveAll(d)
		}
	}
}

// ctxReader stops reading when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// flushChunk is how much of a staged file is written before the kernel
// is asked to start writing it to disk.
const flushChunk = 8 << 20

// flushingWriter writes to f and starts the disk writes of every
// flushChunk written (sync_file_range, SYNC_FILE_RANGE_WRITE: it does not
// wait), so that the disk works while the rest downloads and the fsync at
// the end waits only for the tail.
type flushingWriter struct {
	f                *os.File
	written, flushed int64
}

func (w *flushingWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.written-w.flushed >= flushChunk {
		// Best effort: where it is not supported, the fsync does it all.
		startWriteback(w.f, w.flushed, w.written-w.flushed)
		w.flushed = w.written
	}
	return n, err
}
