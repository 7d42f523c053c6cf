// Package engines registers every fleet engine gpuattest ships: import
// it for its side effect, and fleet.Parse knows their settings and
// fleet.Open makes their schedulers. An engine's package registers its
// own factory from its init (fleet.Register); adding one here is the
// one line a new engine needs outside its package.
package engines

import (
	// Slurm: sbatch, squeue --json and scancel; a shared directory.
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/slurm"
	// Kubernetes: Indexed Jobs; an OCI registry.
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/kube"
)
