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

import (
	"slices"

	"github.com/gpuattest/gpuattest/pipeline"
)

// Split divides p into the part that runs once on the submitting
// machine (steps without gpu: true that no GPU step comes before) and
// the part every node runs (the GPU steps and every step after one),
// whose needs on the first part are dropped: the nodes get that part's
// outputs staged instead. Either may have no steps.
func Split(p *pipeline.Pipeline) (build, nodes *pipeline.Pipeline) {
	onNode := map[string]bool{}
	// Steps are in any order; iterate until no step changes side.
	for changed := true; changed; {
		changed = false
		for _, s := range p.Steps {
			if onNode[s.ID] {
				continue
			}
			if s.GPU || slices.ContainsFunc(s.Needs, func(n string) bool { return onNode[n] }) {
				onNode[s.ID] = true
				changed = true
			}
		}
	}
	b, n := *p, *p
	b.Steps, n.Steps = nil, nil
	for _, s := range p.Steps {
		if !onNode[s.ID] {
			b.Steps = append(b.Steps, s)
			continue
		}
		s.Needs = slices.DeleteFunc(slices.Clone(s.Needs), func(id string) bool { return !onNode[id] })
		n.Steps = append(n.Steps, s)
	}
	return &b, &n
}
