package source

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // git's object ids; compared, not trusted for secrecy
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"
)

// Bounds on what a walk of a commit's tree reads from the object store.
const (
	// MaxTreeEntries caps the files a commit's tree may hold.
	MaxTreeEntries = 500_000
	// MaxTreeDepth caps the nesting of directories in a commit's tree.
	MaxTreeDepth = 256
	// MaxBlobBytes caps one file of a commit.
	MaxBlobBytes = 4 << 30
	// maxTreeObject caps one tree or commit object.
	maxTreeObject = 16 << 20
	// objectsTimeout bounds one git cat-file process.
	objectsTimeout = 30 * time.Minute
)

// entry is one file of a commit's tree: its slash path, git mode
// (100644, 100755, 120000 or 160000) and object id.
type entry struct {
	path, mode, oid string
}

// objects reads objects from a repository's store with one git cat-file
// --batch process, checking that each object's content hashes to its id:
// a tampered object store (a handed-over checkout) cannot make a commit
// id stand for other files.
type objects struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	in      io.WriteCloser
	out     *bufio.Reader
	newHash func() hash.Hash
	stderr  *limited
}

// openObjects starts git cat-file --batch in top for a repository whose
// object ids are hexLen hex digits long (40: SHA-1, 64: SHA-256).
func openObjects(ctx context.Context, top string, hexLen int) (*objects, error) {
	o := &objects{stderr: &limited{max: 64 << 10}}
	switch hexLen {
	case 40:
		o.newHash = sha1.New
	case 64:
		o.newHash = sha256.New
	default:
		return nil, fmt.Errorf("object ids of %d hex digits: expected 40 (SHA-1) or 64 (SHA-256)", hexLen)
	}
	ctx, o.cancel = context.WithTimeout(ctx, objectsTimeout)
	o.cmd = gitCommand(ctx, top, nil, "cat-file", "--batch")
	o.cmd.Stderr = o.stderr
	var err error
	if o.in, err = o.cmd.StdinPipe(); err != nil {
		o.cancel()
		return nil, err
	}
	stdout, err := o.cmd.StdoutPipe()
	if err != nil {
		o.cancel()
		return nil, err
	}
	o.out = bufio.NewReaderSize(stdout, 64<<10)
	if err := o.cmd.Start(); err != nil {
		o.cancel()
		return nil, fmt.Errorf("starting git cat-file: %w", err)
	}
	return o, nil
}

// close ends the git process.
func (o *objects) close() {
	o.in.Close()
	o.cancel()
	_ = o.cmd.Wait()
}

// read writes the content of object oid, which must be of type typ and at
// most max bytes, to w, and checks that it hashes to oid.
func (o *objects) read(oid, typ string, max int64, w io.Writer) error {
	if _, err := io.WriteString(o.in, oid+"\n"); err != nil {
		return o.failed(oid, err)
	}
	header, err := o.out.ReadString('\n')
	if err != nil {
		return o.failed(oid, err)
	}
	f := strings.Fields(header)
	if len(f) == 2 && f[1] == "missing" {
		return fmt.Errorf("object %s: missing from the repository\nhint: fetch the commit's objects (git fetch), or rebuild from a full clone", oid)
	}
	if len(f) != 3 || f[0] != oid {
		return fmt.Errorf("object %s: git cat-file said %q: expected \"%s <type> <size>\"", oid, strings.TrimSpace(header), oid)
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return fmt.Errorf("object %s: size %q: expected a byte count", oid, f[2])
	}
	if f[1] != typ {
		return fmt.Errorf("object %s: a %s, expected a %s", oid, f[1], typ)
	}
	if size > max {
		return fmt.Errorf("object %s: %d bytes, more than the %d allowed", oid, size, max)
	}
	h := o.newHash()
	fmt.Fprintf(h, "%s %d\x00", typ, size)
	var werr error
	if _, err := io.CopyN(io.MultiWriter(h, errWriter{w, &werr}), o.out, size); err != nil {
		return o.failed(oid, err)
	}
	if werr != nil {
		return werr
	}
	if nl, err := o.out.ReadByte(); err != nil || nl != '\n' {
		return o.failed(oid, errors.New("no newline after the object"))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != oid {
		return fmt.Errorf("object %s: its content hashes to %s: the repository's object store was altered\nhint: rebuild from a fresh clone of the repository", oid, got)
	}
	return nil
}

func (o *objects) failed(oid string, err error) error {
	return fmt.Errorf("reading object %s with git cat-file: %w %s", oid, err, strings.TrimSpace(o.stderr.String()))
}

// errWriter writes to w and, after its first error, keeps accepting
// bytes (so the object is read to its end) and records the error.
type errWriter struct {
	w   io.Writer
	err *error
}

func (e errWriter) Write(p []byte) (int, error) {
	if *e.err == nil {
		_, *e.err = e.w.Write(p)
	}
	return len(p), nil
}

// tree lists every file of commit's tree, depth first, reading (and
// checking) the commit and each tree object.
func (o *objects) tree(commit string) ([]entry, error) {
	var buf bytes.Buffer
	if err := o.read(commit, "commit", maxTreeObject, &buf); err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(buf.String(), "\n")
	root, ok := strings.CutPrefix(first, "tree ")
	if !ok || len(root) != len(commit) {
		return nil, fmt.Errorf("commit %s: first line %q: expected \"tree <id>\"", commit, first)
	}
	var out []entry
	var walk func(oid, dir string, depth int) error
	walk = func(oid, dir string, depth int) error {
		if depth > MaxTreeDepth {
			return fmt.Errorf("commit %s: directories nested more than %d deep at %s", commit, MaxTreeDepth, dir)
		}
		var raw bytes.Buffer
		if err := o.read(oid, "tree", maxTreeObject, &raw); err != nil {
			return err
		}
		idLen := len(oid) / 2
		b := raw.Bytes()
		for len(b) > 0 {
			sp := bytes.IndexByte(b, ' ')
			nul := bytes.IndexByte(b, 0)
			if sp < 0 || nul < sp || len(b) < nul+1+idLen {
				return fmt.Errorf("tree %s (%s): malformed entry", oid, orTop(dir))
			}
			mode, name := string(b[:sp]), string(b[sp+1:nul])
			id := hex.EncodeToString(b[nul+1 : nul+1+idLen])
			b = b[nul+1+idLen:]
			if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || strings.EqualFold(name, ".git") {
				return fmt.Errorf("tree %s (%s): entry name %q: expected a plain file name other than .git", oid, orTop(dir), name)
			}
			p := path.Join(dir, name)
			switch mode {
			case "40000":
				if err := walk(id, p, depth+1); err != nil {
					return err
				}
				continue
			case "100644", "100755", "120000", "160000":
			case "100664":
				mode = "100644"
			default:
				return fmt.Errorf("tree %s: %s has git mode %s: expected a file, link, directory or submodule", oid, p, mode)
			}
			if len(out) == MaxTreeEntries {
				return fmt.Errorf("commit %s: more than %d files", commit, MaxTreeEntries)
			}
			out = append(out, entry{path: p, mode: mode, oid: id})
		}
		return nil
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	return out, nil
}

func orTop(dir string) string {
	if dir == "" {
		return "the top directory"
	}
	return dir
}

// blobID is the id git gives a blob with content read from r, with the
// hash of an id hexLen digits long.
func blobID(hexLen int, size int64, r io.Reader) (string, error) {
	var h hash.Hash
	if hexLen == 64 {
		h = sha256.New()
	} else {
		h = sha1.New()
	}
	fmt.Fprintf(h, "blob %d\x00", size)
	n, err := io.Copy(h, r)
	if err != nil {
		return "", err
	}
	if n != size {
		return "", fmt.Errorf("read %d bytes, expected %d (the file changed while read)", n, size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
