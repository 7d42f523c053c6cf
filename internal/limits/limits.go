// Package limits holds the size and nesting bounds of every document
// gpuattest reads from users or strangers (pipelines, locks, results,
// JUnit, run records), and the readers that enforce them: a hostile input
// is refused with the limit named, before it costs memory or time.
package limits

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"syscall"
)

// The bounds. Each is far above what a real document of its kind holds.
const (
	// PipelineBytes bounds a pipeline file (real ones are a few KB).
	PipelineBytes = 1 << 20
	// LockBytes bounds a gpuattest.lock.
	LockBytes = 4 << 20
	// ResultsBytes bounds a results file or JUnit XML a step writes (a
	// benchmark with 100 000 samples per case and a few dozen cases is
	// tens of MB).
	ResultsBytes = 256 << 20
	// RecordBytes bounds run.json and the files a run directory holds
	// beside it (hardware.json, benchmark.json).
	RecordBytes = 256 << 20
	// YAMLNesting bounds how deeply YAML flow collections ([...], {...})
	// nest; a pipeline needs four or five.
	YAMLNesting = 64
)

// TooLargeError says a document exceeded its size bound.
type TooLargeError struct {
	Name  string // the file or source
	What  string // what it is ("pipeline", "results file", ...)
	Limit int64  // the bound, in bytes
}

// Error names the document, the limit, and asks whether it is the right
// file.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: %s larger than %s, the most gpuattest reads\nhint: a real %s is far smaller; is this the right file?", e.Name, e.What, Human(e.Limit), e.What)
}

// Human writes a byte count for messages: "16 MiB", "64 KiB", "894 bytes".
func Human(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadFile reads the file at path, refusing one larger than max bytes
// (a *TooLargeError) without reading past the limit. It must be a regular
// file: a FIFO or a device would block or never end.
func ReadFile(path string, max int64, what string) ([]byte, error) {
	f, err := Open(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A file already larger than the limit is refused unread (refusing a
	// 200 MB bundle file took 424 MB when it was read up to the limit);
	// one that grows while it is read is caught by ReadAll.
	if st, err := f.Stat(); err == nil && st.Size() > max {
		return nil, &TooLargeError{Name: path, What: what, Limit: max}
	}
	buf := bytes.NewBuffer(nil)
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		buf.Grow(int(st.Size()) + 1)
	}
	if _, err := io.Copy(buf, io.LimitReader(f, max+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > max {
		return nil, &TooLargeError{Name: path, What: what, Limit: max}
	}
	return buf.Bytes(), nil
}

// ErrNotRegular is wrapped by Open's error for a path that is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading if it is a regular file (what names it in
// the error). The open does not wait on a FIFO, and the check is made on
// the opened file, so a path swapped after a check cannot slip through.
func Open(path, what string) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; on a regular
	// file it changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
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
		return nil, fmt.Errorf("%s: %s is %s, %w", path, what, kind(st.Mode()), ErrNotRegular)
	}
	return f, nil
}

// kind names a file mode that is not a regular file.
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
	return "a " + m.Type().String()
}

// ReadAll reads r to its end, refusing more than max bytes.
func ReadAll(r io.Reader, max int64, name, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &TooLargeError{Name: name, What: what, Limit: max}
	}
	return b, nil
}

// ErrTooDeep is wrapped by the error CheckYAMLNesting returns.
var ErrTooDeep = errors.New("nesting too deep")

// CheckYAMLNesting scans YAML source for flow collections nested deeper
// than max, outside quoted scalars and comments, and returns the 1-based
// line and column where the nesting first goes past max (0, 0 when it
// never does). It runs before the parser, whose memory grows steeply with
// flow nesting.
func CheckYAMLNesting(data []byte, max int) (line, col int) {
	depth := 0
	line, col = 1, 0
	var quote byte // the open quote, 0 outside
	comment := false
	prev := byte('\n') // the previous byte
	sig := byte('\n')  // the previous byte that is not a space or tab
	for i := 0; i < len(data); i++ {
		c := data[i]
		col++
		switch {
		case c == '\n':
			line, col, comment = line+1, 0, false
		case comment:
		case quote == '"':
			if c == '\\' && i+1 < len(data) {
				i++
				col++
			} else if c == '"' {
				quote = 0
			}
		case quote == '\'':
			if c == '\'' {
				if i+1 < len(data) && data[i+1] == '\'' {
					i++
					col++
				} else {
					quote = 0
				}
			}
		case c == '#' && (prev == ' ' || prev == '\t' || prev == '\n'):
			comment = true
		case (c == '"' || c == '\'') && opensScalar(sig):
			quote = c
		case c == '[' || c == '{':
			depth++
			if depth > max {
				return line, col
			}
		case c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
		}
		if c == '\n' {
			sig = '\n'
		} else if c != ' ' && c != '\t' && !comment {
			sig = c
		}
		prev = c
	}
	return 0, 0
}

// opensScalar reports whether a quote after the significant byte prev
// starts a quoted scalar (and is not, say, the apostrophe in a plain
// scalar such as it's).
func opensScalar(prev byte) bool {
	switch prev {
	case '\n', ':', ',', '[', '{', '-', '?':
		return true
	}
	return false
}

// SoftMemory is the Go heap size past which a gpuattest process collects
// garbage eagerly (runtime/debug.SetMemoryLimit). The goal is that no
// input of 10 MB or less takes a command past 256 MB of RSS; a 9 MB
// results file of 300,000 cases took `run` to 263 MB with the default
// collector pacing, and to 231 MB under this limit. It is soft: a larger
// legitimate input still completes, with more garbage collection.
const SoftMemory = 192 << 20

// GCPercent is the collector's pacing (GOGC) of a gpuattest process, set
// once main runs. A command is short-lived and its heap small, so
// collecting at every doubling of a heap of a few MB (GOGC=100 starts at
// a 4 MB goal) is waste: with GOGC=100 a single verify collects once
// (GODEBUG=gctrace=1), with GCPercent not at all. Large heaps are still
// bounded by SoftMemory.
const GCPercent = 200

// SetSoftMemoryLimit sets SoftMemory as the process's memory limit unless
// GOMEMLIMIT chose one, and GCPercent as its pacing unless GOGC chose one.
func SetSoftMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(SoftMemory)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
