package stagefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// A dispatch directory lies on a filesystem that other users share. The
// node and the coordinator trust a path on it only when no one but its
// user (and root) can replace what the path leads to:
//
//   - every directory from / down to the dispatch directory's parent is
//     owned by root or the user, and writable by group or others only
//     with the sticky bit (which keeps others from renaming or deleting
//     entries they do not own);
//   - the dispatch directory itself, and each directory the node uses in
//     it (keys/, jobs/, jobs/<job>/, jobs/<job>/run/), is a directory
//     owned by the user, not a symbolic link, and not writable by group
//     or others;
//   - the path is resolved once to its real path (no symbolic link left
//     in it) and opened as an os.Root, whose identity is checked against
//     that path; every later use goes through that path, which no one
//     else can now change.

// UserName names uid for a message: "alice (uid 1001)".
func UserName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// othersCanReplace says why a user other than uid and root could rename,
// delete or replace the entries of the directory fi describes, or "".
func othersCanReplace(fi fs.FileInfo, uid int) string {
	if !fi.IsDir() {
		return "it is not a directory (" + fi.Mode().Type().String() + ")"
	}
	if o := OwnerOf(fi); o != 0 && o != uid {
		return "it is owned by " + UserName(o) + ", who can rename and replace its entries"
	}
	perm := fi.Mode()
	if perm&0o022 != 0 && perm&fs.ModeSticky == 0 {
		who := "group"
		switch {
		case perm&0o020 == 0:
			who = "others"
		case perm&0o002 != 0:
			who = "group and others"
		}
		return fmt.Sprintf("it is writable by %s without the sticky bit (%v), so they can rename and replace its entries", who, perm)
	}
	return ""
}

// ErrUnsafePath is wrapped by the error of a path that someone other than
// its user could replace.
var ErrUnsafePath = errors.New("others could replace this path")

// unsafePath is the error for path, which others could replace.
func unsafePath(path, why, hint string) error {
	return fmt.Errorf("%w: %s: %s\nhint: %s", ErrUnsafePath, path, why, hint)
}

// checkAncestors checks every directory from / down to dir (dir
// included), a real path with no symbolic link in it: none may let a
// user other than uid or root rename its entries.
func checkAncestors(dir string, uid int) error {
	if err := ownersKnown(); err != nil {
		return err
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s is not an absolute path", dir)
	}
	p := string(filepath.Separator)
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(dir), p), p)
	if parts[0] == "" {
		parts = nil
	}
	for i := -1; i < len(parts); i++ {
		if i >= 0 {
			p = filepath.Join(p, parts[i])
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return unsafePath(p, "it became a symbolic link while it was checked", "keep the shared directory where no one else can rename it")
		}
		if why := othersCanReplace(fi, uid); why != "" {
			return unsafePath(p, why, fmt.Sprintf("a dispatch directory must be reachable only through directories that no one but you and root can rename entries of: as their owner, chmod +t %s (or chmod go-w %s), or set sharedDir to a directory of your own, made with mkdir -m 0755, under one that has the sticky bit", p, p))
		}
	}
	return nil
}

// CheckSharedDir checks the fleet's sharedDir before a dispatch is
// staged in it: sharedDir and every directory above it must keep users
// other than this one (and root) from renaming their entries, so that no
// co-tenant can swap the dispatch directory for one of their own. It
// returns sharedDir's real path.
func CheckSharedDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("sharedDir %s: %w", dir, err)
	}
	if err := checkAncestors(real, os.Geteuid()); err != nil {
		return "", fmt.Errorf("refusing to stage in sharedDir %s: %w", dir, err)
	}
	return real, nil
}

// TrustedDir is a dispatch directory checked as above, opened as an
// os.Root.
type TrustedDir struct {
	// RealPath is its real path; Root the directory, opened; UID the
	// user it was checked for.
	RealPath string
	Root     *os.Root
	UID      int
}

// OpenTrusted resolves the dispatch directory dir to its real path,
// checks it and every directory above it for this process's user, and
// opens it.
func OpenTrusted(dir string) (*TrustedDir, error) { return OpenTrustedAs(dir, os.Geteuid()) }

// OpenTrustedAs is OpenTrusted for the user uid.
func OpenTrustedAs(dir string, uid int) (*TrustedDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("the dispatch directory: %w", err)
	}
	if err := checkAncestors(filepath.Dir(real), uid); err != nil {
		return nil, fmt.Errorf("refusing the dispatch directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, err
	}
	t := &TrustedDir{RealPath: real, Root: root, UID: uid}
	fi, err := root.Stat(".")
	if err == nil {
		var at fs.FileInfo
		if at, err = os.Lstat(real); err == nil && !os.SameFile(fi, at) {
			err = unsafePath(real, "it was replaced while it was opened", "keep the shared directory where no one else can rename it")
		}
	}
	if err == nil {
		err = t.checkDir(".", fi, 0o022)
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return t, nil
}

// Remove removes name, relative to the directory, through the checked
// directory: no link is followed.
func (t *TrustedDir) Remove(name string) error { return t.Root.Remove(name) }

// Close closes the directory.
func (t *TrustedDir) Close() error { return t.Root.Close() }

// Path is the real path of name in the directory.
func (t *TrustedDir) Path(name string) string {
	return filepath.Join(t.RealPath, filepath.FromSlash(name))
}

// checkDir checks that name, whose information fi was read without
// following a symbolic link, is a directory owned by the user with none
// of the mode bits in deny.
func (t *TrustedDir) checkDir(name string, fi fs.FileInfo, deny fs.FileMode) error {
	path := t.Path(name)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return unsafePath(path, "it is a symbolic link", "the node follows no link in its dispatch directory; was the directory tampered with?")
	case !fi.IsDir():
		return unsafePath(path, "it is not a directory", "was the dispatch directory tampered with?")
	case OwnerOf(fi) != t.UID:
		return unsafePath(path, "it is owned by "+UserName(OwnerOf(fi))+", not by "+UserName(t.UID)+", who runs this job", "a job works only in a dispatch directory its own user staged; was it swapped for another?")
	case fi.Mode().Perm()&deny != 0:
		return unsafePath(path, fmt.Sprintf("its mode %v gives group or others access that only its user may have", fi.Mode().Perm()), "staging makes the dispatch directory 0755 and keys/ and jobs/ 0700; was it changed after staging?")
	}
	return nil
}

// Dir checks each directory along name (a slash-separated path in the
// directory), none of it a symbolic link, each owned by the user with
// none of the mode bits in deny. A missing one is an error wrapping
// fs.ErrNotExist.
func (t *TrustedDir) Dir(name string, deny fs.FileMode) error {
	parts := strings.Split(name, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		fi, err := t.Root.Lstat(sub)
		if err != nil {
			return err
		}
		if err := t.checkDir(sub, fi, deny); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile reads the regular file name (a slash-separated path in the
// directory, not a symbolic link), refusing more than max bytes; the
// directory that holds it must pass Dir with deny.
func (t *TrustedDir) ReadFile(name string, max int64, what string, deny fs.FileMode) ([]byte, fs.FileInfo, error) {
	if dir := filepath.ToSlash(filepath.Dir(filepath.FromSlash(name))); dir != "." {
		if err := t.Dir(dir, deny); err != nil {
			return nil, nil, err
		}
	}
	at, err := t.Root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !at.Mode().IsRegular() {
		return nil, nil, unsafePath(t.Path(name), what+" is not a regular file ("+at.Mode().Type().String()+")", "was the dispatch directory tampered with?")
	}
	f, err := t.Root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !os.SameFile(fi, at) {
		return nil, nil, unsafePath(t.Path(name), what+" was replaced while it was read", "was the dispatch directory tampered with?")
	}
	b, err := limits.ReadAll(io.Reader(f), max, t.Path(name), what)
	return b, fi, err
}
