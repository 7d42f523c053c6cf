package image

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Read-ahead of a layer's uncompressed stream: streamBuffers buffers of
// streamBufSize bytes (8 MiB in flight) between the goroutine that
// decompresses and hashes and the one that writes files.
const (
	streamBufSize = 1 << 20
	streamBuffers = 8
)

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// uncompressedPreferrer is an image whose layers are read through
// Uncompressed: a docker archive's, whose Compressed go-containerregistry
// serves by compressing the archive's uncompressed layers on the fly.
type uncompressedPreferrer interface{ preferUncompressed() }

// archiveImage is an image read from a docker archive.
type archiveImage struct{ v1.Image }

func (archiveImage) preferUncompressed() {}

// openLayer returns l's uncompressed tar stream. Gzip and zstd layers are
// read as stored (Compressed) and decompressed with klauspost/compress,
// about twice as fast as go-containerregistry's compress/gzip; the format
// is told by the stream's magic number, so a layer whose media type lies
// is still read right. Uncompressed layers, and every layer of an image
// that prefers it, are read through Uncompressed.
func openLayer(l v1.Layer, viaUncompressed bool) (io.ReadCloser, error) {
	mt, err := l.MediaType()
	if err != nil || viaUncompressed || !compressedType(mt) {
		return l.Uncompressed()
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(rc, streamBufSize)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("reading gzip header: %w", err)
		}
		return &decompressed{Reader: zr, src: br, close: rc.Close}, nil
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("reading zstd header: %w", err)
		}
		return &decompressed{Reader: zr, src: br, close: func() error { zr.Close(); return rc.Close() }}, nil
	default:
		return &decompressed{Reader: br, src: br, close: rc.Close}, nil
	}
}

func compressedType(mt types.MediaType) bool {
	switch mt {
	case types.DockerLayer, types.DockerForeignLayer, types.OCILayer, types.OCIRestrictedLayer, types.OCILayerZStd:
		return true
	}
	return false
}

// decompressed is a decompressing reader over a layer's stored bytes. At
// the end of the uncompressed stream it reads the stored stream to its end,
// so that a reader that verifies the stored digest when it reaches EOF (a
// registry's) gets to check it.
type decompressed struct {
	io.Reader
	src   io.Reader
	close func() error
}

func (d *decompressed) Read(p []byte) (int, error) {
	n, err := d.Reader.Read(p)
	if err == io.EOF {
		if _, derr := io.Copy(io.Discard, d.src); derr != nil {
			return n, derr
		}
	}
	return n, err
}

func (d *decompressed) Close() error { return d.close() }

// layerStream is a layer's uncompressed stream, read ahead by a goroutine
// that also hashes it, so that decompressing and hashing run beside the
// tar reader and the file writes, like tar's gzip child process.
type layerStream struct {
	full chan []byte // read-ahead buffers, in order; closed at the end
	free chan []byte // buffers the reader is done with
	stop chan struct{}
	held []byte // the buffer being read, whole
	cur  []byte // what is left of it to read
	// err and sum are set by the goroutine before it closes full.
	err error
	sum []byte
	// done is closed when the goroutine has returned.
	done chan struct{}
}

// newLayerStream starts reading src ahead and hashing it (SHA-256).
func newLayerStream(src io.Reader) *layerStream {
	s := &layerStream{
		full: make(chan []byte, streamBuffers),
		free: make(chan []byte, streamBuffers),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range streamBuffers {
		s.free <- make([]byte, streamBufSize)
	}
	go s.produce(src)
	return s
}

func (s *layerStream) produce(src io.Reader) {
	defer close(s.done)
	defer close(s.full)
	h := sha256.New()
	for {
		var buf []byte
		select {
		case buf = <-s.free:
		case <-s.stop:
			s.err = errStreamClosed
			return
		}
		n, err := io.ReadFull(src, buf[:cap(buf)])
		if n > 0 {
			h.Write(buf[:n])
			select {
			case s.full <- buf[:n]:
			case <-s.stop:
				s.err = errStreamClosed
				return
			}
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			s.sum = h.Sum(nil)
			return
		case err != nil:
			s.err = err
			return
		}
	}
}

var errStreamClosed = errors.New("layer stream closed")

// Read implements io.Reader.
func (s *layerStream) Read(p []byte) (int, error) {
	for len(s.cur) == 0 {
		if s.held != nil {
			s.free <- s.held
			s.held = nil
		}
		b, ok := <-s.full
		if !ok {
			if s.err != nil {
				return 0, s.err
			}
			return 0, io.EOF
		}
		s.held, s.cur = b, b
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// Digest reads what is left of the stream (a tar's end padding) and
// returns the SHA-256 of all of it, "sha256:<hex>".
func (s *layerStream) Digest() (string, error) {
	if _, err := io.Copy(io.Discard, s); err != nil {
		return "", err
	}
	<-s.done
	return "sha256:" + hex.EncodeToString(s.sum), nil
}

// Close stops the goroutine, closes its source with closeSrc (which ends
// a read the goroutine may be blocked in) and waits for the goroutine.
func (s *layerStream) Close(closeSrc func() error) error {
	close(s.stop)
	err := closeSrc()
	<-s.done
	return err
}
