package fleettest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var nodeBinary struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// NodeBinary is a gpuattest executable for the nodes to run, built once
// per test process from this module's cmd/gpuattest (go build: the Go
// tool that runs the tests). It is removed by Main when the tests end;
// $GPUATTEST_TEST_BINARY names one instead.
func NodeBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("GPUATTEST_TEST_BINARY"); p != "" {
		return p
	}
	nodeBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "fleettest-bin-")
		if err != nil {
			nodeBinary.err = err
			return
		}
		nodeBinary.path = filepath.Join(dir, "gpuattest")
		cmd := exec.Command("go", "build", "-o", nodeBinary.path, "github.com/gpuattest/gpuattest/cmd/gpuattest")
		nodeBinary.out, nodeBinary.err = cmd.CombinedOutput()
	})
	if nodeBinary.err != nil {
		t.Fatalf("building gpuattest for the nodes: %v\n%s", nodeBinary.err, nodeBinary.out)
	}
	return nodeBinary.path
}

// Main runs the tests of m (a *testing.M, or what wraps one) and
// removes what NodeBinary built: an engine's tests that run the suite
// call it from their TestMain.
func Main(m interface{ Run() int }) {
	code := m.Run()
	if nodeBinary.path != "" {
		os.RemoveAll(filepath.Dir(nodeBinary.path))
	}
	os.Exit(code)
}
