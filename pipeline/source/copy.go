package source

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// CopyTracked writes the files of info's commit into dst (which must not
// exist yet): regular files with their executable bit, symbolic links as
// links. The files come from the repository's object store, each object's
// id checked against its content, never from the work tree or the index:
// whatever the work tree holds, the copy holds exactly the commit's
// files. A submodule is refused.
func CopyTracked(ctx context.Context, info *Info, dst string) error {
	if !commitRE.MatchString(info.Commit) {
		return fmt.Errorf("commit %q: expected a hex commit id", info.Commit)
	}
	objs, err := openObjects(ctx, info.Top, len(info.Commit))
	if err != nil {
		return err
	}
	defer objs.close()
	entries, err := objs.tree(info.Commit)
	if err != nil {
		return fmt.Errorf("listing the files of commit %s: %w", info.Commit, err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyEntry(objs, root, e); err != nil {
			return fmt.Errorf("copying %s of commit %s: %w", e.path, info.Commit, err)
		}
	}
	return nil
}

// copyEntry writes one file of a commit into dst, a root, so no path
// leaves the tree.
func copyEntry(objs *objects, dst *os.Root, e entry) error {
	name := filepath.FromSlash(e.path)
	if err := dst.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	switch e.mode {
	case "120000":
		var target bytes.Buffer
		if err := objs.read(e.oid, "blob", 4096, &target); err != nil {
			return err
		}
		if bytes.IndexByte(target.Bytes(), 0) >= 0 {
			return fmt.Errorf("symbolic link target %q: expected no NUL byte", target.Bytes())
		}
		return dst.Symlink(target.String(), name)
	case "100644", "100755":
	default:
		return fmt.Errorf("git mode %s: expected a regular file or a symbolic link (submodules are not copied)\nhint: vendor the submodule's files into the repository to rebuild from it", e.mode)
	}
	perm := os.FileMode(0o644)
	if e.mode == "100755" {
		perm = 0o755
	}
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := objs.read(e.oid, "blob", MaxBlobBytes, out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
