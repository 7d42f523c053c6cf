//go:build !unix

package verify_test

import "testing"

// mkfifo skips the test: this platform has no named pipes in the file
// system.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	t.Skipf("no named pipes here (%s)", path)
}
