// Package fleet runs a pipeline's GPU steps across a fleet of nodes
// through the scheduler the cluster already runs. It holds only what
// every engine shares: the fleet file's common fields (Spec, Class), the
// Scheduler interface engines implement (submit, status, cancel,
// describe), Throttle, which spaces any scheduler's polls, and the
// registry of engine factories (Register, Lookup, Open, NodeIdentity).
//
// Each engine is a package of its own that owns its settings in the
// fleet file, their defaults and checks, its scheduler and the staging
// it uses: pipeline/fleet/slurm (sbatch and squeue; a shared directory)
// and pipeline/fleet/kube (Indexed Jobs; an OCI registry). Importing
// pipeline/fleet/engines registers both. The coordinator that stages,
// submits, waits and collects is pipeline/fleet/coordinate; what a job
// runs on its node is pipeline/fleet/node.
package fleet
