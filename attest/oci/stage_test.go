package oci

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestFlushingWriter: a staged file written through flushingWriter, in
// writes that straddle the flush chunks, holds exactly what was written,
// and the writer asked the kernel to start writing back each full chunk.
func TestFlushingWriter(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "layer"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := bytes.Repeat([]byte("0123456789abcdef"), (3*flushChunk+12345)/16)
	w := &flushingWriter{f: f}
	if _, err := io.CopyBuffer(w, bytes.NewReader(want), make([]byte, 3<<20+7)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("staged %d bytes, wrote %d, or they differ", len(got), len(want))
	}
	if w.written != int64(len(want)) || w.flushed < 3*flushChunk || w.flushed > w.written {
		t.Errorf("written %d, flushed %d: want %d written and every full chunk flushed", w.written, w.flushed, len(want))
	}
}
