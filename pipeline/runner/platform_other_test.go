//go:build !unix

package runner

import (
	"io/fs"
	"testing"
)

// fileUID reports no owner where files have no Unix uid.
func fileUID(fs.FileInfo) (int, bool) { return 0, false }

// mkfifo skips the test: this platform has no named pipes in the file
// system.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	t.Skipf("no named pipes here (%s)", path)
}
