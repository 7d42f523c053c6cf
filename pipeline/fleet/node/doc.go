// Package node is the node side of a fleet job: what each job runs on
// its node. Run reads a dispatch on a shared directory (Slurm),
// checks every staged file against it, runs the pipeline's GPU part
// through pipeline/run and signs the node's statement with the job key;
// on Kubernetes Report (the pod's node container, which holds no key)
// and Sign (its sign container) split that work, the dispatch pulled
// from the registry by digest. The node's hardware record comes from
// Config.GPUSource (simulated from the job's gres type with Simulate; see
// simulated in node.go).
package node
