package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
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
	// Decoded, when set, is Predicate already decoded; it is read
	// instead of Predicate.
	Decoded *Predicate
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
	Result string
	Build  *covBuild
	Steps  []covStep
}

type covBuild struct {
	Targets []string
}

type covStep struct {
	ID, Kind, Verdict, Backend string
	Devices                    []covDevice
}

type covDevice struct {
	UUID, Name, ComputeCapability string
	Simulated                     bool
}

// Bounds of what coverage keeps of one predicate, so that a large or
// hostile one costs linear time and bounded space.
const (
	// MaxCoverageTargets is the most distinct targets coverage judges;
	// more fail coverage as such.
	MaxCoverageTargets = 64
	// maxCCs is the most distinct compute capabilities kept per bundle.
	maxCCs = 64
	// summaryMost bounds the lists in coverage messages.
	summaryMost = 4
)

// CoverageFacts are what coverage reads from one bundle's predicate: its
// pinned targets, its passing GPU runs by compute capability (the first
// few named) and what its suites ran on (the first few).
type CoverageFacts struct {
	source  string
	targets []string
	runs    map[string]*named // compute capability -> passing runs
	on      named
}

// named is the first summaryMost of a list of names and how many more.
type named struct {
	names []string
	more  int
}

func (n *named) add(s string) {
	if len(n.names) < summaryMost {
		n.names = append(n.names, s)
	} else {
		n.more++
	}
}

var coverageTarget = lazyregexp.New(`^sm_([0-9]{2,3})([af]?)$`)

// ReadCoverageFacts reads in's predicate for coverage. With
// allowSimulated a simulated GPU counts, whatever backend ran. A
// predicate that cannot be read is an error naming in.Source.
func ReadCoverageFacts(in CoverageInput, allowSimulated bool) (*CoverageFacts, error) {
	pred := in.Decoded
	if pred == nil {
		var err error
		if pred, err = DecodePredicate(in.Predicate); err != nil {
			return nil, fmt.Errorf("%s: reading the predicate for coverage: %w", in.Source, err)
		}
	}
	p, err := coverageOf(pred.tree)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the predicate for coverage: %w", in.Source, err)
	}
	f := &CoverageFacts{source: in.Source, runs: map[string]*named{}}
	if p.Build != nil {
		seen := map[string]bool{}
		for _, t := range p.Build.Targets {
			if !seen[t] && len(f.targets) <= MaxCoverageTargets {
				seen[t] = true
				f.targets = append(f.targets, t)
			}
		}
	}
	for _, s := range p.Steps {
		if s.Kind != "test" && s.Kind != "benchmark" && s.Kind != "burnin" {
			continue
		}
		backend := s.Backend
		if backend == "" {
			backend = "an unknown backend"
		}
		if len(s.Devices) == 0 {
			f.on.add(fmt.Sprintf("%s on %s, no GPU", s.ID, backend))
		}
		for _, d := range s.Devices {
			what := fmt.Sprintf("%s on %s (%s, cc %s)", s.ID, backend, d.Name, d.ComputeCapability)
			if d.Simulated {
				what += " SIMULATED"
			}
			f.on.add(what)
			counts := backend == "cuda" && !d.Simulated || allowSimulated && d.Simulated
			if counts && p.Result == "passed" && (s.Verdict == "passed" || s.Verdict == "cached") {
				f.addRun(d.ComputeCapability, fmt.Sprintf("%s: step %s", in.Source, what))
			}
		}
	}
	return f, nil
}

// addRun records a passing run on a GPU of compute capability cc.
func (f *CoverageFacts) addRun(cc, where string) {
	n, ok := f.runs[cc]
	if !ok {
		if len(f.runs) >= maxCCs {
			return
		}
		n = &named{}
		f.runs[cc] = n
	}
	if !slices.Contains(n.names, where) {
		n.add(where)
	}
}

// Check reports, for every pinned target of the inputs, whether a passing
// GPU run among them covers it (see Coverage.Targets). An input whose
// predicate cannot be read is an error naming it.
func (c *Coverage) Check(ins []CoverageInput, allowSimulated bool) ([]TargetCoverage, error) {
	facts := make([]*CoverageFacts, 0, len(ins))
	for _, in := range ins {
		f, err := ReadCoverageFacts(in, allowSimulated)
		if err != nil {
			return nil, err
		}
		facts = append(facts, f)
	}
	return c.Judge(facts), nil
}

// Judge reports, for every target the bundles of facts pin, whether a
// passing GPU run among them covers it; with no target pinned, whether
// any GPU run passed.
func (c *Coverage) Judge(facts []*CoverageFacts) []TargetCoverage {
	var targets []string
	seen := map[string]bool{}
	for _, f := range facts {
		for _, t := range f.targets {
			if !seen[t] {
				seen[t] = true
				targets = append(targets, t)
			}
		}
	}
	if len(targets) > MaxCoverageTargets {
		return []TargetCoverage{{Target: "targets", Detail: fmt.Sprintf("more than %d distinct targets pinned: coverage judges at most %d", MaxCoverageTargets, MaxCoverageTargets)}}
	}
	sort.Strings(targets)
	summary := ranOnSummary(facts)
	if len(targets) == 0 {
		tc := TargetCoverage{Target: "gpu"}
		tc.Detail, tc.Covered = coveredBy(facts, func(string) bool { return true }, "gpu run missing: no bundle pins a target and no passed test, benchmark or burn-in ran on a GPU; "+summary)
		return []TargetCoverage{tc}
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
		tc.Detail, tc.Covered = coveredBy(facts, match, missing)
		out = append(out, tc)
	}
	return out
}

// coveredBy names the runs on a GPU whose compute capability matches and
// reports true, or returns missing and false when there is none.
func coveredBy(facts []*CoverageFacts, match func(cc string) bool, missing string) (string, bool) {
	var by named
	for _, f := range facts {
		ccs := make([]string, 0, len(f.runs))
		for cc := range f.runs {
			ccs = append(ccs, cc)
		}
		sort.Strings(ccs)
		for _, cc := range ccs {
			if !match(cc) {
				continue
			}
			for _, w := range f.runs[cc].names {
				by.add(w)
			}
			by.more += f.runs[cc].more
		}
	}
	if len(by.names) == 0 {
		return missing, false
	}
	return "covered by " + by.String(), true
}

// String lists the names, then how many more there are.
func (n *named) String() string {
	s := strings.Join(n.names, ", ")
	if n.more > 0 {
		s += fmt.Sprintf(" and %d more", n.more)
	}
	return s
}

// ranOnSummary says what the bundles' suites ran on, in one line of
// bounded length: at most summaryMost bundles, summaryMost suites each.
func ranOnSummary(facts []*CoverageFacts) string {
	var parts named
	for _, f := range facts {
		on := f.on
		if len(on.names) == 0 {
			on.names = []string{"no test, benchmark or burn-in"}
		}
		parts.add(f.source + ": " + on.String())
	}
	if len(parts.names) == 0 {
		return "no bundle to cover it"
	}
	s := "the bundles ran: " + strings.Join(parts.names, "; ")
	if parts.more > 0 {
		s += fmt.Sprintf("; and %d more bundles", parts.more)
	}
	return s
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
