package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// samples are n seeded draws around mean ns with 2% spread.
func samples(rng *rand.Rand, n int, mean float64) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.FormatFloat(mean*(1+0.02*rng.NormFloat64()), 'f', 1, 64)
	}
	return out
}

// benchCase is one case of a results file, samples given as JSON text.
func benchCase(name string, samples []string) string {
	n, err := json.Marshal(name)
	if err != nil {
		panic(err) // a string always encodes
	}
	return fmt.Sprintf(`{"name":%s,"kernel":"k","status":"passed","samples_ns":[%s]}`, n, strings.Join(samples, ","))
}

// compareCase is a compare call: baseline and candidate results, the
// exit it must answer and a pattern its output must match.
type compareCase struct {
	name                string
	baseline, candidate string
	exit                int
	want                string
	extra               []string
}

// compareCases (issue 15 items 5, 6 and 8): compare and the benchmark
// gate's statistics on hostile candidates. Duplicate case names and
// duplicate JSON keys are refused with their position, NaN and negative
// samples are refused, AMBIGUOUS fails the gate, a million samples a side
// answer within the goals, and no case name reaches the terminal raw.
func compareCases(ctx context.Context, l *lab) ([]result, error) {
	rng := l.rng("compare")
	base := resultsJSON(benchCase("copy/n=1024", samples(rng, 30, 1000)))
	slow := func(f float64, n int) string { return resultsJSON(benchCase("copy/n=1024", samples(rng, n, 1000*f))) }
	// A million samples a side is issue 15's goal (2 s of CPU); it sits
	// near the goal on a loaded machine, so CI runs 300,000.
	big := l.n(300_000, 1_000_000)
	cs := []compareCase{
		{name: "same distribution", baseline: base, candidate: slow(1, 30), exit: 0, want: `copy/n=1024 +SAME`},
		{name: "10% slower", baseline: base, candidate: slow(1.1, 30), exit: 1, want: `copy/n=1024 +SLOWER`},
		{name: "duplicate case name, second copy 99% slower", baseline: base,
			candidate: resultsJSON(benchCase("copy/n=1024", samples(rng, 30, 1000)), benchCase("copy/n=1024", samples(rng, 30, 99000))),
			exit:      1, want: `cases\[1\]\.name: "copy/n=1024" repeats cases\[0\]`},
		{name: "duplicate samples_ns key", baseline: base,
			candidate: strings.Replace(slow(1, 30), `"samples_ns":[`, `"samples_ns":[1,2,3],"samples_ns":[`, 1), exit: 1, want: `:\d+:\d+: cases\[0\]: key "samples_ns" appears twice`},
		{name: "NaN sample", baseline: base, candidate: strings.Replace(slow(1, 30), `"samples_ns":[`, `"samples_ns":[NaN,`, 1), exit: 1, want: `:1:\d+: `},
		{name: "negative sample", baseline: base, candidate: strings.Replace(slow(1, 30), `"samples_ns":[`, `"samples_ns":[-5,`, 1), exit: 1, want: `samples_ns`},
		{name: "5 samples, 893% slower: AMBIGUOUS fails the gate", baseline: base, candidate: slow(9.93, 5), exit: 1, want: `AMBIGUOUS`},
		{name: "the same with --allow-ambiguous", baseline: base, candidate: slow(9.93, 5), exit: 0, want: `AMBIGUOUS`, extra: []string{"--allow-ambiguous"}},
		{name: "terminal escapes in a case name", baseline: resultsJSON(benchCase("a\x1b[2K\x1b[1A\u202e", samples(rng, 30, 1000))),
			candidate: resultsJSON(benchCase("a\x1b[2K\x1b[1A\u202e", samples(rng, 30, 1000))), exit: 0, want: `SAME`},
		{name: fmt.Sprintf("%d samples a side, 10%% slower", big), baseline: resultsJSON(benchCase("copy/n=1024", samples(rng, big, 1000))),
			candidate: resultsJSON(benchCase("copy/n=1024", samples(rng, big, 1100))), exit: 1, want: `SLOWER`},
	}
	dir := filepath.Join(l.dir, "compare")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var rs []result
	for i, c := range cs {
		b, cand := filepath.Join(dir, fmt.Sprintf("%d-base.json", i)), filepath.Join(dir, fmt.Sprintf("%d-cand.json", i))
		if err := os.WriteFile(b, []byte(c.baseline), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(cand, []byte(c.candidate), 0o644); err != nil {
			return nil, err
		}
		u, out, err := l.call(ctx, dir, nil, append([]string{"compare", "--baseline", b, "--candidate", cand}, c.extra...)...)
		if err != nil {
			return nil, err
		}
		r := result{name: c.name, usage: u}
		r.right, r.why = exitIn(u, out, c.exit)
		if r.right && !regexp.MustCompile(c.want).MatchString(out) {
			r.right, r.why = false, fmt.Sprintf("output does not match %q%s", c.want, tail(out))
		} else if bad := unsafeText(out); r.right && bad != "" {
			r.right, r.why = false, bad+tail(out)
		}
		rs = append(rs, r)
		os.Remove(b)
		os.Remove(cand)
	}
	return rs, nil
}
