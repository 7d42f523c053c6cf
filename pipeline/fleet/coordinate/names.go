package coordinate

import "github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"

// Names in a dispatch directory and in a job's environment, which the
// coordinator and the node side (pipeline/fleet/node) share.
const (
	// DispatchFile is the signed dispatch, in the dispatch directory and
	// in the run directory.
	DispatchFile = stagefs.DispatchFile
	// NodeFile is a node's bundle.
	NodeFile = stagefs.NodeFile
	// JobScript is the job script every job runs.
	JobScript = stagefs.JobScript
	// ReleaseEnv carries the staged dispatch's reference by digest
	// (Kubernetes).
	ReleaseEnv = stagefs.ReleaseEnv
	// ReportFile is the node's unsigned report (Kubernetes).
	ReportFile = stagefs.ReportFile
	// SimulateEnv, set to 1 in a job's environment, makes the node
	// simulate its GPUs from the class's gres type, labelled simulated.
	SimulateEnv = stagefs.SimulateEnv
)

// KeyPath is where job's private key is staged in the dispatch
// directory dir, on a shared directory.
func KeyPath(dir, job string) string { return stagefs.KeyPath(dir, job) }

// CheckSharedDir checks that no one but this user (and root) can
// replace the shared directory dir or what it holds, and returns its
// real path.
func CheckSharedDir(dir string) (string, error) { return stagefs.CheckSharedDir(dir) }

// ErrUnsafePath is wrapped by the errors for a path on the shared
// directory another user could replace.
var ErrUnsafePath = stagefs.ErrUnsafePath
