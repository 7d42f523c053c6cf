package suite

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/stats"
)

// Why rounds: auto stopped (SequentialRounds.Stop).
const (
	// StopDecided: the gate decided every case.
	StopDecided = "decided"
	// StopMaxRounds: maxRounds pairs ran.
	StopMaxRounds = "max_rounds"
	// StopTime: another block would have overrun roundsTime or the
	// step's timeout.
	StopTime = "time"
)

// SequentialRounds is how rounds: auto sampled: its budget, why it
// stopped, and after how many pairs each case was decided.
type SequentialRounds struct {
	// MaxRounds and Budget are the budget: the most pairs, and the time
	// the pairs may take (roundsTime, or less when the step's timeout
	// comes first).
	MaxRounds int    `json:"max_rounds"`
	Budget    string `json:"budget"`
	// Stop is StopDecided, StopMaxRounds or StopTime; Elapsed how long
	// the pairs took.
	Stop    string `json:"stop"`
	Elapsed string `json:"elapsed"`
	// Decided maps each case the gate decided to the number of pairs it
	// was decided after: its verdict is the one judged on those pairs.
	Decided map[string]int `json:"decided,omitempty"`
}

// orderRand returns r, or, when r is nil, a generator seeded from
// crypto/rand, with the seed to record.
func orderRand(r *rand.Rand) (*rand.Rand, uint64, error) {
	if r != nil {
		return r, 0, nil
	}
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return nil, 0, fmt.Errorf("drawing the ABBA order: %w", err)
	}
	seed := binary.LittleEndian.Uint64(b[:])
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed, nil
}

// runOrder runs the invocations of order (true: the candidate), each
// pair's seed from the step's seeds by ABBA block.
func (br *benchRun) runOrder(ctx context.Context, order []bool) error {
	st := br.s.Step
	for _, cand := range order {
		i := len(br.cand) + len(br.ref)
		seedv := -1
		if len(st.Seeds) > 0 {
			seedv = st.Seeds[(i/4)%len(st.Seeds)]
		}
		side, n := sideReference, len(br.ref)
		if cand {
			side, n = sideCandidate, len(br.cand)
		}
		inv, err := br.invoke(ctx, side, n, seedv)
		if err != nil {
			return err
		}
		if cand {
			br.cand = append(br.cand, *inv)
		} else {
			br.ref = append(br.ref, *inv)
		}
	}
	return nil
}

// runSequential adds ABBA blocks of two pairs until the gate decides
// every case measured on both sides (ComparePairedSequential after every
// block), maxRounds pairs ran, or another block would overrun the time
// budget: roundsTime, and the step's own timeout (the context's
// deadline), which must leave room for three of the slowest blocks so far
// (a load spike) and the step's reports. It returns the invocation order.
func (br *benchRun) runSequential(ctx context.Context, r *rand.Rand) ([]bool, error) {
	st := br.s.Step
	maxPairs, budget := st.MaxRounds, st.RoundsTime.Value()
	if maxPairs <= 0 {
		maxPairs = pipeline.DefaultMaxRounds
	}
	if budget <= 0 {
		budget = pipeline.DefaultRoundsTime.Value()
	}
	start := time.Now()
	end, hard := start.Add(budget), time.Time{}
	if dl, ok := ctx.Deadline(); ok {
		hard = dl
		if dl.Before(end) {
			end, budget = dl, dl.Sub(start)
		}
	}
	seq := &SequentialRounds{MaxRounds: maxPairs, Budget: budget.Round(time.Second).String(), Stop: StopMaxRounds, Decided: map[string]int{}}
	br.d.Reference.Sequential = seq
	br.decided = seq.Decided
	var order []bool
	var block time.Duration // the slowest block so far
	for len(br.cand) < maxPairs {
		now := time.Now()
		if block > 0 && (now.Add(block).After(end) || !hard.IsZero() && now.Add(3*block).After(hard)) {
			seq.Stop = StopTime
			break
		}
		b := abbaOrder(min(2, maxPairs-len(br.cand)), r)
		order = append(order, b...)
		if err := br.runOrder(ctx, b); err != nil {
			return nil, err
		}
		block = max(block, time.Since(now))
		undecided := br.look(maxPairs, end)
		if undecided == 0 {
			seq.Stop = StopDecided
			break
		}
	}
	seq.Elapsed = time.Since(start).Round(time.Millisecond).String()
	if len(seq.Decided) == 0 {
		seq.Decided = nil
	}
	return order, nil
}

// look judges every undecided case measured on both sides with the
// sequential test on the pairs so far, records the ones now decided,
// reports progress, and returns how many are left undecided. A case that
// an invocation did not report stays undecided: the final comparison
// says why.
func (br *benchRun) look(maxPairs int, end time.Time) int {
	g, _ := gateSettings(br.s.Step.Gate)
	pairs := len(br.cand)
	p := runtypes.Progress{Rounds: pairs, MaxRounds: maxPairs, TimeLeft: max(0, time.Until(end)), GateThreshold: g.Threshold}
	for _, inv := range slices.Concat(br.cand, br.ref) {
		for _, c := range inv.res.Cases {
			p.Samples += len(c.SamplesNS)
		}
	}
	width := -1.0
	for _, key := range br.pairedKeys() {
		if _, ok := br.decided[key]; ok {
			continue
		}
		ref, cand := invocationSamples(br.ref, key), invocationSamples(br.cand, key)
		if slices.ContainsFunc(slices.Concat(ref, cand), func(x []float64) bool { return len(x) == 0 }) {
			p.Undecided++
			continue
		}
		c, err := stats.ComparePairedSequential(ref, cand, g, false)
		if err != nil {
			p.Undecided++
			continue
		}
		if c.Verdict != stats.Ambiguous {
			br.decided[key] = pairs
			br.s.Logger.Info("gate decided", "case", key, "verdict", c.Verdict, "pairs", pairs)
			continue
		}
		p.Undecided++
		w := c.Shift.CI.Hi - c.Shift.CI.Lo
		if !c.Shift.CI.Exact {
			w = math.Inf(1)
		}
		if w > width {
			width = w
			p.GateCase, p.GateDelta, p.GateLo, p.GateHi = key, c.Shift.Delta, c.Shift.CI.Lo, c.Shift.CI.Hi
			if !c.Shift.CI.Exact {
				p.GateLo, p.GateHi = math.Inf(-1), math.Inf(1)
			}
		}
	}
	br.look0 = p
	br.s.Report(p)
	return p.Undecided
}

// pairedKeys are the keys of the cases with samples on both sides, in
// the candidate's order.
func (br *benchRun) pairedKeys() []string {
	has := func(invs []invocation) map[string]bool {
		m := map[string]bool{}
		for _, inv := range invs {
			for _, c := range inv.res.Cases {
				if len(c.SamplesNS) > 0 {
					m[CaseKey(c.Name)] = true
				}
			}
		}
		return m
	}
	ref := has(br.ref)
	var keys []string
	seen := map[string]bool{}
	for _, inv := range br.cand {
		for _, c := range inv.res.Cases {
			k := CaseKey(c.Name)
			if len(c.SamplesNS) > 0 && ref[k] && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// comparePairedCase judges one case measured on both sides: with rounds:
// auto on the pairs it was decided after (all of them, final, when it
// never was), with rounds: N once on all of them.
func (br *benchRun) comparePairedCase(ref, cand [][]float64, key string, g stats.Gate) (stats.Comparison, error) {
	if br.d.Reference == nil || br.d.Reference.Sequential == nil {
		return stats.ComparePaired(ref, cand, g)
	}
	if k, ok := br.decided[key]; ok && k <= len(ref) {
		return stats.ComparePairedSequential(ref[:k], cand[:k], g, false)
	}
	return stats.ComparePairedSequential(ref, cand, g, true)
}
