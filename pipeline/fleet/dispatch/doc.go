// Package dispatch runs a pipeline across a fleet: the steps without
// gpu: true (builds, the reproducibility check) once on the submitting
// machine, then every GPU step on every node of every class through a
// fleet engine, under a dispatch signed by the release owner (see
// attest/dispatch for the statements and their verification).
//
// A dispatch directory on the shared filesystem:
//
//	dispatch.intoto.jsonl     the signed dispatch
//	job.sh                    the job script every job runs
//	bin/gpuattest             the gpuattest the nodes run
//	work/...                  the staged work tree: source and build outputs
//	logs/                     the jobs' stdout and stderr
//	jobs/<job>/job.key        the job's private key (0600; deleted when the job ends)
//	jobs/<job>/work/          the node's own copy of the work tree
//	jobs/<job>/run/           the node's run directory (resumed after a requeue)
//	jobs/<job>/step           the step the node is running
//	jobs/<job>/node.intoto.jsonl   the node's bundle, signed with the job key
//
// The job key lives outside the work tree the steps run in and no
// variable names it: no step can reach it, as with run --key.
package dispatch
