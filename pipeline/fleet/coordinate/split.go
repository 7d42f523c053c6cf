package coordinate

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
	// The GPUs that must sign evidence are the nodes', not the machine
	// that builds.
	b.RequireGPUEvidence = false
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
