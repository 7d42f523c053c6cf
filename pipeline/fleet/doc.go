// Package fleet runs a pipeline's GPU steps across a fleet of nodes
// through the scheduler the cluster already runs. It holds the engine
// interface that schedulers implement (Slurm in pipeline/fleet/slurm;
// Kubernetes Indexed Jobs later), and the fleet file: which engine and
// partition, the shared directory the nodes read and write, and one
// entry per node class with its selectors, the targets it covers and its
// time limit.
package fleet
