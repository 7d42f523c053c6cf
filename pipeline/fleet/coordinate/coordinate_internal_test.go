package coordinate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

// TestMarkCancelled: after Ctrl-C or a timeout, the record shows every
// job that had not ended as cancelled by the coordinator, never as
// pending or running; an ended job keeps its state, and a failed cancel
// is said.
func TestMarkCancelled(t *testing.T) {
	s := &State{Jobs: []JobState{
		{Name: "a100-0", Status: fleet.Status{ID: "1", State: fleet.Running, Node: "n1"}},
		{Name: "h100-0", Status: fleet.Status{ID: "2", State: fleet.Pending}},
		{Name: "h100-1", Status: fleet.Status{ID: "3", State: fleet.Completed}},
	}}
	s.markCancelled(nil)
	if got := s.Jobs[0].Status; got.State != fleet.Cancelled || got.Raw != string(fleet.Running) || got.Node != "n1" || !strings.Contains(got.Reason, "cancelled by the coordinator") {
		t.Errorf("running job: %+v", got)
	}
	if s.Jobs[1].Status.State != fleet.Cancelled || s.Jobs[2].Status.State != fleet.Completed {
		t.Errorf("states %s, %s", s.Jobs[1].Status.State, s.Jobs[2].Status.State)
	}
	s = &State{Jobs: []JobState{{Name: "a100-0", Status: fleet.Status{ID: "1", State: fleet.Running}}}}
	s.markCancelled(errors.New("scancel: connection refused"))
	if got := s.Jobs[0].Status; got.State != fleet.Running || !strings.Contains(got.Reason, "could not cancel it") {
		t.Errorf("after a failed cancel: %+v", got)
	}
}

// TestReadStep (issue 30, item 9): the coordinator reads a job's step
// file bounded, a regular file only, following no link: a link to
// /dev/zero or a FIFO neither blocks nor grows the read.
func TestReadStep(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(path("ok"), []byte("check\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("big"), make([]byte, maxStepFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("escape"), []byte("a\x1b[2Jb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for target, link := range map[string]string{"/dev/zero": "zero", "ok": "link"} {
		if err := os.Symlink(target, path(link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(path("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want string
		wantErr    error
	}{
		{name: "ok", want: "check"},
		{name: "escape", want: `a\x1b[2Jb`},
		{name: "big", wantErr: &limits.TooLargeError{}},
		{name: "zero", wantErr: syscall.ELOOP},
		{name: "link", wantErr: syscall.ELOOP},
		{name: "fifo", wantErr: limits.ErrNotRegular},
		{name: "missing", wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		done := make(chan struct{})
		var got string
		var err error
		go func() { got, err = readStep(path(tt.name)); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: readStep has not returned after 10 s", tt.name)
		}
		var tooLarge *limits.TooLargeError
		switch {
		case tt.wantErr == nil && (err != nil || got != tt.want):
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		case errors.As(tt.wantErr, &tooLarge) && !errors.As(err, &tooLarge):
			t.Errorf("%s: %v, want a TooLargeError", tt.name, err)
		case tt.wantErr != nil && !errors.As(tt.wantErr, &tooLarge) && !errors.Is(err, tt.wantErr):
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}
