package k8stest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// shared is the package's one control plane under Main: started by the
// first Shared call, stopped when m.Run returns.
var shared struct {
	sync.Mutex
	main    bool
	nodes   []Node
	started bool
	base    *Cluster
	stop    func()
	err     error
}

// Main runs m with one control plane for the whole package, started by
// the first test that calls Shared (none when every such test skips) with
// nodes, and stopped when the tests end; the tail of each component's
// log is printed when a test failed. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(k8stest.Main(m, nodes...)) }
func Main(m *testing.M, nodes ...Node) int {
	shared.Lock()
	shared.main, shared.nodes = true, nodes
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.stop != nil {
		if code != 0 {
			fmt.Fprint(os.Stderr, shared.base.Logs())
		}
		shared.stop()
	}
	return code
}

// Shared returns the package's control plane (Main's), with a namespace
// and a restricted user of the test's own; the nodes are everyone's.
// Without the binaries it skips the test, or fails it when CI=true or
// GPUATTEST_K8S=1.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	Require(tb)
	shared.Lock()
	if !shared.main {
		shared.Unlock()
		tb.Fatal("k8stest.Shared needs TestMain to run k8stest.Main(m, nodes...)")
	}
	if !shared.started {
		shared.started = true
		shared.base, shared.stop, shared.err = Serve("", shared.nodes...)
	}
	base, err := shared.base, shared.err
	shared.Unlock()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := base.cp.newCluster(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(c.Logs())
		}
	})
	return c
}
