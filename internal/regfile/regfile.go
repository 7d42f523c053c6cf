package regfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// chunk is how much is read between two checks of the context.
const chunk = 1 << 20

// ErrNotRegular is the error Open wraps for a path that is not a regular
// file (a directory, FIFO, socket or device).
var ErrNotRegular = errors.New("not a regular file")

// TooLargeError is ReadFile's error for a file over its limit.
type TooLargeError struct {
	// Path is the file.
	Path string
	// Size is its size, Limit the most that was allowed.
	Size, Limit int64
}

// Error names the file, its size and the limit.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: %s, more than the limit of %s", e.Path, Size(e.Size), Size(e.Limit))
}

// Open opens path for reading if it is a regular file. The open does not
// block on a FIFO (it is made non-blocking) and fstat decides, so a path
// swapped between a check and the open cannot slip through.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	return f, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// ReadFile reads the regular file at path, refusing one larger than
// limit bytes with a *TooLargeError before reading it.
func ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, &TooLargeError{Path: path, Size: st.Size(), Limit: limit}
	}
	buf := make([]byte, 0, st.Size()+1)
	r := io.LimitReader(Reader(ctx, f), limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(buf)) > limit {
		// It grew while being read.
		return nil, &TooLargeError{Path: path, Size: int64(len(buf)), Limit: limit}
	}
	return buf, nil
}

// SHA256 returns the lowercase hex sha256 of the regular file at path and
// its size, checking ctx between chunks.
func SHA256(ctx context.Context, path string) (string, int64, error) {
	f, err := Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, Reader(ctx, f), make([]byte, chunk))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Reader returns r with ctx checked before each read of at most a chunk:
// once ctx is done, reads fail with its error.
func Reader(ctx context.Context, r io.Reader) io.Reader { return &ctxReader{ctx: ctx, r: r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

// Read reads at most a chunk, once ctx is checked.
func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > chunk {
		p = p[:chunk]
	}
	return c.r.Read(p)
}

// Size formats a byte count for messages: "16 MiB", "1.5 KiB", "300 B".
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := fmt.Sprintf("%.1f", v)
	if v == float64(int64(v)) {
		s = fmt.Sprintf("%d", int64(v))
	}
	return s + " " + string("KMGTPE"[exp]) + "iB"
}
