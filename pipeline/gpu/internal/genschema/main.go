// Command genschema writes the hardware record JSON Schema generated from
// gpu.Record to the file named by its argument (go generate runs it).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/pipeline/gpu"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genschema OUT.json")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "genschema:", err)
		os.Exit(1)
	}
}

// write replaces out atomically (temp file in the same directory, fsync,
// rename).
func write(out string) error {
	b, err := gpu.RecordSchemaJSON()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".hardware.schema.*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}
