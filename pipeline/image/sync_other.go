//go:build !linux

package image

import (
	"io/fs"
	"os"
	"path/filepath"
)

// syncFS makes everything under dir durable where there is no syncfs: it
// fsyncs every regular file and directory under it (slower than one
// syncfs, with the same guarantee for the tree). Symbolic links live in
// their directory, which is synced.
func syncFS(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		serr := f.Sync()
		if cerr := f.Close(); serr == nil {
			serr = cerr
		}
		return serr
	})
}

// startWriteback does nothing where sync_file_range does not exist:
// syncFS writes every file at the end.
func startWriteback(*os.File) {}
