package suite

import (
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// progress reports a benchmark's samples so far, with inv (just read)
// counted, and the widest relative 95 % interval of a candidate case's
// median, for a live display.
func (br *benchRun) progress(inv *invocation) {
	if br.s.Progress == nil {
		return
	}
	p := br.look0 // rounds: auto's last look
	p.Samples, p.CIWidth = 0, 0
	if br.s.Step.Reference != nil {
		nc, nr := len(br.cand), len(br.ref)
		if inv.side == sideCandidate {
			nc++
		} else {
			nr++
		}
		p.Rounds = min(nc, nr) // complete pairs
	}
	cand := map[string][]float64{}
	add := func(in *invocation) {
		for _, c := range in.res.Cases {
			p.Samples += len(c.SamplesNS)
			if in.side == sideCandidate {
				k := CaseKey(c.Name)
				cand[k] = append(cand[k], c.SamplesNS...)
			}
		}
	}
	for i := range br.cand {
		add(&br.cand[i])
	}
	for i := range br.ref {
		add(&br.ref[i])
	}
	add(inv)
	for _, xs := range cand {
		if len(xs) < 2 {
			continue
		}
		ci := stats.MedianCI(xs, 0.95)
		if m := stats.Median(xs); m > 0 {
			p.CIWidth = max(p.CIWidth, (ci.Hi-ci.Lo)/m)
		}
	}
	br.s.Report(p)
}
