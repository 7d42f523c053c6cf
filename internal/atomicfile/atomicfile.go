// Package atomicfile writes files so that a reader (or a crash) sees either
// the old content or the new, never a part: temp file in the same directory,
// fsync, rename, fsync of the directory.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteNoDirSync is Write without the fsync of the directory: the file's
// content is synced and the rename atomic, so readers and a crashed writer
// see old or new content, but after a power loss the rename itself may be
// lost. For files rewritten often whose last write syncs the directory.
func WriteNoDirSync(path string, data []byte, perm os.FileMode) error {
	return writeFrom(path, perm, false, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFrom replaces path with what fill writes.
func WriteFrom(path string, perm os.FileMode, fill func(io.Writer) error) error {
	return writeFrom(path, perm, true, fill)
}

// WriteNew writes data to path atomically and fails when path exists: the
// final step is a hard link, which never replaces a file.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists: refusing to overwrite it", path)
		}
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func writeFrom(path string, perm os.FileMode, syncDir bool, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	if syncDir {
		if d, derr := os.Open(dir); derr == nil {
			_ = d.Sync()
			d.Close()
		}
	}
	return nil
}

// Copy copies src to dst atomically, keeping src's permission bits.
func Copy(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return CopyFrom(dst, in)
}

// CopyFrom copies the open file in to dst atomically, keeping in's
// permission bits; the caller chose how in was opened (through an
// os.Root, for one).
func CopyFrom(dst string, in *os.File) error {
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return WriteFrom(dst, st.Mode().Perm(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// WriteInRoot writes name (relative to root) atomically through root: the
// temp file and the rename happen inside root, so neither can land
// outside it whatever symlinks the tree holds. Missing parent directories
// are created.
func WriteInRoot(root *os.Root, name string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(name)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	var f *os.File
	var tmp string
	for i := 0; ; i++ {
		tmp = filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%d", filepath.Base(name), os.Getpid(), i))
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err = root.Rename(tmp, name); err != nil {
		return fmt.Errorf("renaming into %s: %w", name, err)
	}
	return nil
}
