package source

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// CopyTracked copies the files git tracks in info's work tree into dst
// (which must not exist yet): regular files with their executable bit,
// symbolic links as links. A submodule is refused. Use it on a clean tree
// (CheckClean): the copy then holds exactly the commit's files.
func CopyTracked(ctx context.Context, info *Info, dst string) error {
	out, err := git(ctx, info.Top, nil, "ls-files", "-z", "--stage")
	if err != nil {
		return fmt.Errorf("listing tracked files: %w", err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	src, err := os.OpenRoot(info.Top)
	if err != nil {
		return err
	}
	defer src.Close()
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, name, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return fmt.Errorf("git ls-files: unexpected record %q", rec)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyEntry(src, root, f[0], filepath.FromSlash(name)); err != nil {
			return fmt.Errorf("copying %s: %w", name, err)
		}
	}
	return nil
}

// copyEntry copies one index entry of mode (git's octal mode) from src to
// dst, both roots, so no path leaves either tree.
func copyEntry(src, dst *os.Root, mode, name string) error {
	if err := dst.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	switch mode {
	case "120000":
		target, err := src.Readlink(name)
		if err != nil {
			return err
		}
		return dst.Symlink(target, name)
	case "100644", "100755":
	default:
		return fmt.Errorf("git mode %s: expected a regular file or a symbolic link (submodules are not copied)\nhint: vendor the submodule's files into the repository to rebuild from it", mode)
	}
	fi, err := src.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file in the work tree")
	}
	in, err := src.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	perm := os.FileMode(0o644)
	if mode == "100755" {
		perm = 0o755
	}
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
