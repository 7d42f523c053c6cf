// Package coordinate is the fleet's coordinator: it runs a pipeline
// across a fleet, the steps without gpu: true (builds, the
// reproducibility check) once on the submitting machine, then every GPU
// step on every node of every class through a fleet engine, under a
// dispatch signed by the release owner (see attest/dispatch for the
// statements and their verification). It stages the dispatch through
// the transport the engine chose (transport.go: a shared directory or a
// registry), submits, waits and collects; pipeline/fleet/node is what
// each job runs on its node (node.Run, or node.Report and node.Sign).
//
// A dispatch directory on the shared filesystem:
//
//	dispatch.intoto.jsonl     the signed dispatch
//	job.sh                    the job script every job runs
//	bin/gpuattest             the gpuattest the nodes run
//	work/...                  the staged work tree: source and build outputs
//	logs/                     the jobs' stdout and stderr
//	keys/<job>.key            the job's private key (0600 in a 0700 directory; deleted when the job ends)
//	jobs/<job>/work/          the node's own copy of the work tree
//	jobs/<job>/run/           the node's run directory (resumed after a requeue)
//	jobs/<job>/step           the step the node is running
//	jobs/<job>/node.intoto.jsonl   the node's bundle, signed with the job key
//
// The node reads its job key before it runs anything. The key lives
// outside the job's directory and the work tree the steps run in, no
// variable names it, and HOME is moved when the key lies under it; it
// stays on the shared directory only so that a requeued job can sign.
// The docker and bwrap runners mount the work tree alone, so their steps
// cannot reach it. On Slurm (node.Run) a step on the host runner runs in a
// runner.Sandbox that covers the whole shared directory with an empty
// file system, binds back only the job's work tree and, for a gpu: true
// step, the NVIDIA device nodes; the node fails, naming the opt-out, when
// bwrap cannot start. A fleet file's hostSteps: unsandboxed (signed in the
// dispatch) runs them as the job's user with no sandbox, where one that
// walks the shared directory by path can read the key; the node statement
// records which ("sandbox": "bwrap" or "none"; see docs/fleet.md).
//
// On Kubernetes (a fleet with a kubernetes: block) the same directory is
// made under the run directory, without bin/gpuattest (the pod image
// holds it), and pushed to the fleet's registry as one release; each
// pod's node container pulls it by digest and runs node.Report, and its
// sign container, the only one given the class's Secret of job keys,
// runs node.Sign and pushes the node bundle back under NodeTag (see
// release.go). The keys of a Kubernetes dispatch are made in memory and
// go to the engine's Secrets alone, never to disk.
package coordinate
