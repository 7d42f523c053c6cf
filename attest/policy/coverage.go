package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Coverage is what a policy asks of all the bundles verified together,
// rather than of each: the bundles of one release validated on several
// machines (an A100 box and an H100 box, each signing its own run).
type Coverage struct {
	// Targets requires every target pinned in any bundle's build facts
	// (predicate.build.targets) to be covered: some bundle whose result
	// is passed holds a passed test, benchmark or burn-in that ran with
	// backend cuda on a real GPU of the target's compute capability
	// (sm_80: 8.0; sm_90 and sm_90a: 9.0; sm_100f: 10.0 or a later 10.x).
	// When no bundle pins a target, one such GPU run is required. With
	// simulated hardware allowed, a simulated GPU counts, whatever
	// backend ran.
	Targets bool `yaml:"targets" json:"targets"`
}

// Requirement says in words what c requires.
func (c *Coverage) Requirement(allowSimulated bool) string {
	on := "with backend cuda on a real GPU"
	if allowSimulated {
		on = "on a GPU (SIMULATED GPUs COUNT: --allow-simulated)"
	}
	return "every target pinned in build.targets is covered by a passed test, benchmark or burn-in " + on +
		" of its compute capability (sm_80 by 8.0, sm_90 and sm_90a by 9.0), across all the bundles verified together"
}

// CoverageInput is one verified bundle's predicate, named for messages.
type CoverageInput struct {
	// Source names the bundle ("file:line").
	Source string
	// Predicate is the gpu-validation predicate.
	Predicate json.RawMessage
}

// TargetCoverage is whether one target is covered.
type TargetCoverage struct {
	// Target is the pinned target ("sm_90"), or "gpu" when no bundle pins
	// one and any GPU run is asked for.
	Target string `json:"target"`
	// ComputeCapability is the compute capability that covers it ("9.0"),
	// empty for "gpu".
	ComputeCapability string `json:"compute_capability,omitempty"`
	// Covered is true when a passing GPU run covers it.
	Covered bool `json:"covered"`
	// Detail names the runs that cover it, or says what is missing.
	Detail string `json:"detail"`
}

// covPredicate is the part of a gpu-validation predicate coverage reads.
type covPredicate struct {
	Result string `json:"result"`
	Build  *struct {
		Targets []string `json:"targets"`
	} `json:"build"`
	Steps []struct {
		ID      string      `json:"id"`
		Kind    string      `json:"kind"`
		Verdict string      `json:"verdict"`
		Backend string      `json:"backend"`
		Devices []covDevice `json:"devices"`
	} `json:"steps"`
}

type covDevice struct {
	UUID              string `json:"uuid"`
	Name              string `json:"name"`
	ComputeCapability string `json:"compute_capability"`
	Simulated         bool   `json:"simulated"`
}

// gpuRun is a passed suite step on one GPU.
type gpuRun struct {
	where string // "SOURCE: step ID on NAME"
	cc    string
}

var coverageTarget = regexp.MustCompile(`^sm_([0-9]{2,3})([af]?)$`)

// Check reports, for every pinned target of the inputs, whether a passing
// GPU run among them covers it (see Coverage.Targets). An input whose
// predicate cannot be read is an error naming it.
func (c *Coverage) Check(ins []CoverageInput, allowSimulated bool) ([]TargetCoverage, error) {
	var runs []gpuRun
	var targets []string
	ranOn := map[string][]string{} // source -> what its suites ran on
	seenTarget := map[string]bool{}
	for _, in := range ins {
		var p covPredicate
		if err := json.NewDecoder(bytes.NewReader(in.Predicate)).Decode(&p); err != nil {
			return nil, fmt.Errorf("%s: reading the predicate for coverage: %w", in.Source, err)
		}
		if p.Build != nil {
			for _, t := range p.Build.Targets {
				if !seenTarget[t] {
					seenTarget[t] = true
					targets = append(targets, t)
				}
			}
		}
		r, on := passingGPURuns(in.Source, &p, allowSimulated)
		runs = append(runs, r...)
		ranOn[in.Source] = on
	}
	sort.Strings(targets)
	summary := ranOnSummary(ins, ranOn)
	if len(targets) == 0 {
		tc := TargetCoverage{Target: "gpu"}
		tc.Detail, tc.Covered = coveredBy(runs, func(string) bool { return true }, "gpu run missing: no bundle pins a target and no passed test, benchmark or burn-in ran on a GPU; "+summary)
		return []TargetCoverage{tc}, nil
	}
	out := make([]TargetCoverage, 0, len(targets))
	for _, t := range targets {
		match, cc, ok := targetCC(t)
		tc := TargetCoverage{Target: t, ComputeCapability: cc}
		if !ok {
			tc.Detail = fmt.Sprintf("%s: not a target coverage can judge: expected sm_<compute capability> such as sm_90", t)
			out = append(out, tc)
			continue
		}
		missing := fmt.Sprintf("%s missing: no passed test, benchmark or burn-in ran on a GPU of compute capability %s; %s", t, cc, summary)
		tc.Detail, tc.Covered = coveredBy(runs, match, missing)
		out = append(out, tc)
	}
	return out, nil
}

// coveredBy names the runs that match and reports true, or returns
// missing and false when none does.
func coveredBy(runs []gpuRun, match func(cc string) bool, missing string) (string, bool) {
	var by []string
	seen := map[string]bool{}
	for _, r := range runs {
		if match(r.cc) && !seen[r.where] {
			seen[r.where] = true
			by = append(by, r.where)
		}
	}
	if len(by) == 0 {
		return missing, false
	}
	return "covered by " + strings.Join(most(by, summaryMost), ", "), true
}

// passingGPURuns returns the runs of p that count for coverage, and what
// each of its suites ran on.
func passingGPURuns(source string, p *covPredicate, allowSimulated bool) ([]gpuRun, []string) {
	var runs []gpuRun
	var on []string
	for _, s := range p.Steps {
		if s.Kind != "test" && s.Kind != "benchmark" && s.Kind != "burnin" {
			continue
		}
		backend := s.Backend
		if backend == "" {
			backend = "an unknown backend"
		}
		if len(s.Devices) == 0 {
			on = append(on, fmt.Sprintf("%s on %s, no GPU", s.ID, backend))
		}
		for _, d := range s.Devices {
			what := fmt.Sprintf("%s on %s (%s, cc %s)", s.ID, backend, d.Name, d.ComputeCapability)
			if d.Simulated {
				what += " SIMULATED"
			}
			on = append(on, what)
			counts := backend == "cuda" && !d.Simulated || allowSimulated && d.Simulated
			if counts && p.Result == "passed" && (s.Verdict == "passed" || s.Verdict == "cached") {
				runs = append(runs, gpuRun{where: fmt.Sprintf("%s: step %s", source, what), cc: d.ComputeCapability})
			}
		}
	}
	return runs, on
}

// ranOnSummary says what the inputs' suites ran on, in one line of
// bounded length: at most summaryMost bundles, summaryMost suites each.
func ranOnSummary(ins []CoverageInput, ranOn map[string][]string) string {
	var parts []string
	for _, in := range ins {
		on := ranOn[in.Source]
		if len(on) == 0 {
			on = []string{"no test, benchmark or burn-in"}
		}
		parts = append(parts, in.Source+": "+strings.Join(most(on, summaryMost), ", "))
	}
	if len(parts) == 0 {
		return "no bundle to cover it"
	}
	return "the bundles ran: " + strings.Join(most(parts, summaryMost), "; ")
}

// summaryMost bounds the lists in coverage messages.
const summaryMost = 4

// most returns the first n of ss, and "and N more" for the rest.
func most(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(ss[:n:n], fmt.Sprintf("and %d more", len(ss)-n))
}

// targetCC returns a matcher of the compute capabilities that cover
// target t and the capability in words.
func targetCC(t string) (func(string) bool, string, bool) {
	m := coverageTarget.FindStringSubmatch(t)
	if m == nil {
		return nil, "", false
	}
	n, _ := strconv.Atoi(m[1])
	major, minor := n/10, n%10
	want := fmt.Sprintf("%d.%d", major, minor)
	if m[2] != "f" {
		return func(cc string) bool { return cc == want }, want, true
	}
	return func(cc string) bool {
		ma, mi, ok := strings.Cut(cc, ".")
		a, err1 := strconv.Atoi(ma)
		b, err2 := strconv.Atoi(mi)
		return ok && err1 == nil && err2 == nil && a == major && b >= minor
	}, fmt.Sprintf("%s (or a later %d.x)", want, major), true
}
