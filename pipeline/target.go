package pipeline

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
)

// Architectures lists the real CUDA SASS targets a pipeline may pin.
var Architectures = []string{
	"sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75",
	"sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
	"sm_100", "sm_100a", "sm_101", "sm_101a", "sm_103", "sm_103a", "sm_120", "sm_120a", "sm_121", "sm_121a",
}

// Target is a CUDA architecture: a compute capability and, for code that
// uses architecture- or family-specific features, a suffix. It names both
// the SASS a build embeds for it (sm_90a) and the virtual architecture the
// PTX is written for (compute_90a).
type Target struct {
	// Major and Minor are the compute capability (9 and 0 for sm_90).
	Major, Minor int
	// Suffix is "" for portable code, "a" for architecture-specific code
	// (sm_90a runs on compute capability 9.0 only) or "f" for
	// family-specific code (sm_100f runs on the 10.x family).
	Suffix string
}

var (
	targetRE = lazyregexp.New(`^sm_([0-9]{2,3})([af]?)$`)
	codeRE   = lazyregexp.New(`^(sm|compute)_([0-9]{2,3})([af]?)$`)
)

// ParseTarget parses a pinned target written as sm_XY (or sm_XYa, sm_XYf).
// It checks the form only; [Target.Known] tells whether the architecture
// exists.
func ParseTarget(s string) (Target, error) {
	m := targetRE.FindStringSubmatch(s)
	if m == nil {
		return Target{}, fmt.Errorf("target %q: expected sm_<compute capability> such as sm_80 or sm_90", s)
	}
	return newTarget(m[1], m[2]), nil
}

// ParseCode parses the name of one kind of device code: sm_XY for SASS or
// compute_XY for PTX (either with an a or f suffix). ptx tells which.
func ParseCode(s string) (t Target, ptx bool, err error) {
	m := codeRE.FindStringSubmatch(s)
	if m == nil {
		return Target{}, false, fmt.Errorf("target %q: expected sm_XY or compute_XY (e.g. sm_90)", s)
	}
	return newTarget(m[2], m[3]), m[1] == "compute", nil
}

// newTarget builds a target from the digits of its name (90, 100, 121)
// and its suffix.
func newTarget(digits, suffix string) Target {
	n, _ := strconv.Atoi(digits) // the patterns allow digits only
	return Target{Major: n / 10, Minor: n % 10, Suffix: suffix}
}

// ParseTargets parses pinned targets and sorts them, lowest first,
// refusing duplicates and an empty list.
func ParseTargets(ss []string) ([]Target, error) {
	if len(ss) == 0 {
		return nil, fmt.Errorf("no pinned targets\nhint: set targets: [sm_80, sm_90] in the pipeline")
	}
	out := make([]Target, 0, len(ss))
	for _, s := range ss {
		t, err := ParseTarget(s)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("target %s is listed twice", s)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, CompareTargets)
	return out, nil
}

// CompareTargets orders targets by compute capability, then by suffix
// (sm_90 before sm_90a before sm_100); it returns -1, 0 or +1.
func CompareTargets(a, b Target) int {
	return cmp.Or(cmp.Compare(a.CC(), b.CC()), cmp.Compare(a.Suffix, b.Suffix))
}

// CC returns the compute capability as one number, 10*major + minor (90
// for sm_90, 100 for sm_100).
func (t Target) CC() int { return t.Major*10 + t.Minor }

// SM returns the SASS name, e.g. sm_90a.
func (t Target) SM() string { return fmt.Sprintf("sm_%d%s", t.CC(), t.Suffix) }

// Compute returns the virtual architecture name, e.g. compute_90a.
func (t Target) Compute() string { return fmt.Sprintf("compute_%d%s", t.CC(), t.Suffix) }

// String returns the SASS name.
func (t Target) String() string { return t.SM() }

// Specific reports whether code for t runs only on its own architecture
// (a suffix) or family (f suffix).
func (t Target) Specific() bool { return t.Suffix != "" }

// Known reports whether t is a real architecture a pipeline may pin (see
// [Architectures]).
func (t Target) Known() bool { return slices.Contains(Architectures, t.SM()) }

// PTXTarget returns the architecture whose PTX a build for targets embeds
// so that later GPUs can JIT-compile it: the highest target without its
// suffix. Architecture- and family-specific PTX (compute_90a) runs on no
// later architecture, so the PTX is always plain compute_XY. ok is false
// when targets is empty.
func PTXTarget(targets []Target) (t Target, ok bool) {
	if len(targets) == 0 {
		return Target{}, false
	}
	hi := slices.MaxFunc(targets, CompareTargets)
	return Target{Major: hi.Major, Minor: hi.Minor}, true
}
