package suite

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/gpuattest/gpuattest/pipeline"
	"golang.org/x/sys/unix"
)

// opens counts, by name, the files in dir opened for reading only: the
// IN_CLOSE_NOWRITE events inotify reports until stop is called (an open
// for writing, such as the shell's > or the copy's, closes with
// IN_CLOSE_WRITE).
func opens(t *testing.T, dir string) (stop func() map[string]int) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_NOWRITE); err != nil {
		unix.Close(fd)
		t.Fatalf("watching %s: %v", dir, err)
	}
	return func() map[string]int {
		defer unix.Close(fd)
		got := map[string]int{}
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if n <= 0 || err != nil {
				return got
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nameLen := int(binary.NativeEndian.Uint32(buf[off+12 : off+16]))
				name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+nameLen], "\x00"))
				if ev.Mask&unix.IN_CLOSE_NOWRITE != 0 {
					got[name]++
				}
				off += unix.SizeofInotifyEvent + nameLen
			}
		}
	}
}

// TestResultsReadOnce: a test step opens its results file once (read,
// checked, decoded, validated and digested from the same bytes), and
// its copy in the step directory is written, never read back.
func TestResultsReadOnce(t *testing.T) {
	st := pipeline.Step{ID: "t", Kind: pipeline.KindTest, Run: sh(`echo '` + goodJSON + `' > r.json`), Results: "r.json"}
	s := newContext(t, st)
	stopWork := opens(t, s.WorkDir)
	stopStep := opens(t, s.StepDir)
	out, err := Test{}.Execute(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	work, stepDir := stopWork(), stopStep()
	if work["r.json"] != 1 {
		t.Errorf("the results file was opened for reading %d times, want 1 (work dir: %v)", work["r.json"], work)
	}
	if stepDir["results.json"] != 0 {
		t.Errorf("the step directory's copy was read back %d times, want 0 (%v)", stepDir["results.json"], stepDir)
	}
	b, err := os.ReadFile(filepath.Join(s.StepDir, "results.json"))
	if err != nil || !bytes.Equal(b, []byte(goodJSON+"\n")) {
		t.Errorf("copy = %q, %v", b, err)
	}
	if len(out.Results) != 1 || out.Results[0].Size != int64(len(goodJSON)+1) {
		t.Errorf("recorded results %+v", out.Results)
	}
}
