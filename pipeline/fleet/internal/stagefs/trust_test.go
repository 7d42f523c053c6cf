package stagefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuattest/gpuattest/internal/testenv"
)

// The user a dispatch directory is checked for, and another one: uids
// no account has, so the test needs root only to chown.
const (
	jobUID   = 54321
	otherUID = 54322
)

// trustTree is a dispatch directory as staging leaves it, under a
// 0755 shared directory, all of it owned by jobUID; it returns the
// shared directory and the dispatch directory.
func trustTree(t *testing.T) (string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "checking ownership needs root, to give the files to other users")
	}
	top := t.TempDir()
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(top, "shared")
	dir := filepath.Join(shared, "d1")
	for _, d := range []string{"work", "logs", "bin"} {
		mkdir(t, filepath.Join(dir, d), 0o755)
	}
	for _, d := range []string{"keys", "jobs", "jobs/a100-0"} {
		mkdir(t, filepath.Join(dir, d), 0o700)
	}
	for name, mode := range map[string]fs.FileMode{DispatchFile: 0o644, "keys/a100-0.key": 0o600, "work/p.yaml": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	chownAll(t, shared, jobUID)
	return shared, dir
}

func mkdir(t *testing.T, dir string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func chownAll(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTrustedDir (issue 30, item 2): the node works only in a dispatch
// directory that no one but its user can replace, through directories
// no one else can rename entries of, and follows no link in it.
func TestTrustedDir(t *testing.T) {
	tests := []struct {
		name string
		// edit changes the tree (shared, dir) before it is opened.
		edit func(t *testing.T, shared, dir string)
		// read is read after the directory opened; "" reads the dispatch.
		read    string
		wantErr string
	}{
		{name: "as staged"},
		{name: "the key, 0600 in a 0700 directory", read: "keys/a100-0.key"},
		{name: "shared directory sticky and group-writable", edit: func(t *testing.T, shared, _ string) { mkdir(t, shared, 0o775|fs.ModeSticky) }},
		{
			name: "shared directory group-writable without the sticky bit", edit: func(t *testing.T, shared, _ string) { mkdir(t, shared, 0o775|fs.ModeSetgid) },
			wantErr: "writable by group without the sticky bit",
		},
		{
			name: "shared directory writable by others without the sticky bit", edit: func(t *testing.T, shared, _ string) { mkdir(t, shared, 0o757) },
			wantErr: "writable by others without the sticky bit",
		},
		{
			name: "shared directory owned by another user", edit: func(t *testing.T, shared, _ string) { lchown(t, shared, otherUID) },
			wantErr: "owned by uid 54322, who can rename and replace its entries",
		},
		{
			name: "dispatch directory owned by another user", edit: func(t *testing.T, _, dir string) { lchown(t, dir, otherUID) },
			wantErr: "owned by uid 54322, not by uid 54321",
		},
		{
			name: "dispatch directory group-writable", edit: func(t *testing.T, _, dir string) { mkdir(t, dir, 0o775) },
			wantErr: "gives group or others access that only its user may have",
		},
		{
			// A planted directory whose keys/ links to the owner's.
			name: "keys a link", edit: func(t *testing.T, _, dir string) {
				mv(t, filepath.Join(dir, "keys"), filepath.Join(dir, "..", "real-keys"))
				symlink(t, "../real-keys", filepath.Join(dir, "keys"))
			},
			read: "keys/a100-0.key", wantErr: "keys: it is a symbolic link",
		},
		{
			name: "keys readable by the group", edit: func(t *testing.T, _, dir string) { mkdir(t, filepath.Join(dir, "keys"), 0o750) },
			read: "keys/a100-0.key", wantErr: "gives group or others access that only its user may have",
		},
		{
			name: "the dispatch file a link", edit: func(t *testing.T, _, dir string) {
				mv(t, filepath.Join(dir, DispatchFile), filepath.Join(dir, "work", "d"))
				symlink(t, "work/d", filepath.Join(dir, DispatchFile))
			},
			wantErr: "is not a regular file",
		},
		{
			name: "the dispatch file a FIFO", edit: func(t *testing.T, _, dir string) {
				_ = os.Remove(filepath.Join(dir, DispatchFile))
				if err := syscall.Mkfifo(filepath.Join(dir, DispatchFile), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "is not a regular file",
		},
		{
			name: "the dispatch directory reached through a link", edit: func(t *testing.T, shared, dir string) {
				mv(t, dir, filepath.Join(shared, "real"))
				symlink(t, "real", dir)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shared, dir := trustTree(t)
			if tt.edit != nil {
				tt.edit(t, shared, dir)
			}
			err := func() error {
				td, err := OpenTrustedAs(dir, jobUID)
				if err != nil {
					return err
				}
				defer td.Close()
				if real, _ := filepath.EvalSymlinks(dir); td.RealPath != real {
					t.Errorf("path %s, want the real path %s", td.RealPath, real)
				}
				name, deny := DispatchFile, fs.FileMode(0o022)
				if tt.read != "" {
					name, deny = tt.read, 0o077
				}
				b, _, err := td.ReadFile(name, 1<<10, "the file", deny)
				if err == nil && string(b) != name {
					t.Errorf("read %q from %s", b, name)
				}
				return err
			}()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), "hint: ") {
				t.Errorf("error %v has no hint", err)
			}
		})
	}
}

// TestCheckSharedDir: staging refuses a sharedDir in which others can
// rename entries, naming the directory, and says how to fix it.
func TestCheckSharedDir(t *testing.T) {
	top := t.TempDir()
	for _, tt := range []struct {
		mode    fs.FileMode
		wantErr string
	}{
		{mode: 0o755},
		{mode: 0o700},
		{mode: 0o775 | fs.ModeSticky},
		{mode: 0o777 | fs.ModeSticky},
		{mode: 0o775 | fs.ModeSetgid, wantErr: "writable by group without the sticky bit"},
		{mode: 0o777, wantErr: "writable by group and others without the sticky bit"},
	} {
		shared := filepath.Join(top, strings.ReplaceAll(tt.mode.String(), "-", "_"))
		mkdir(t, shared, tt.mode)
		real, err := CheckSharedDir(shared)
		if tt.wantErr == "" {
			if err != nil || real != shared {
				t.Errorf("%v: %q, %v", tt.mode, real, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "refusing to stage in sharedDir "+shared) ||
			!strings.Contains(err.Error(), "hint: ") || !strings.Contains(err.Error(), "chmod +t "+shared) || !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%v: %v, want a refusal naming %s with a hint", tt.mode, err, tt.wantErr)
		}
	}
}

func lchown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func mv(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
