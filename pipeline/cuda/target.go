package cuda

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

// Target is one pinned CUDA target such as sm_80 or sm_90a.
type Target struct {
	// Number is the compute capability without the dot (80 for sm_80).
	Number int
	// Suffix is the architecture-specific feature suffix ("a" in sm_90a).
	Suffix string
}

var targetRE = regexp.MustCompile(`^sm_([0-9]{2,3})([a-z]?)$`)

// ParseTarget parses a target written as sm_XX (or sm_XXa).
func ParseTarget(s string) (Target, error) {
	m := targetRE.FindStringSubmatch(s)
	if m == nil {
		return Target{}, fmt.Errorf("target %q: expected sm_<compute capability> such as sm_80 or sm_90", s)
	}
	n, _ := strconv.Atoi(m[1])
	return Target{Number: n, Suffix: m[2]}, nil
}

// SM returns the SASS name, e.g. sm_80.
func (t Target) SM() string { return fmt.Sprintf("sm_%d%s", t.Number, t.Suffix) }

// Compute returns the virtual architecture name, e.g. compute_80.
func (t Target) Compute() string { return fmt.Sprintf("compute_%d%s", t.Number, t.Suffix) }

// ParseTargets parses and sorts targets (lowest first), refusing
// duplicates and an empty list.
func ParseTargets(ss []string) ([]Target, error) {
	if len(ss) == 0 {
		return nil, fmt.Errorf("no pinned targets\nhint: set targets: [sm_80, sm_90] in the pipeline")
	}
	seen := map[string]bool{}
	out := make([]Target, 0, len(ss))
	for _, s := range ss {
		t, err := ParseTarget(s)
		if err != nil {
			return nil, err
		}
		if seen[t.SM()] {
			return nil, fmt.Errorf("target %s is listed twice", s)
		}
		seen[t.SM()] = true
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Number != out[j].Number {
			return out[i].Number < out[j].Number
		}
		return out[i].Suffix < out[j].Suffix
	})
	return out, nil
}

// GencodeArgs returns nvcc's -gencode arguments for targets: one
// arch=compute_XX,code=sm_XX per target and, when ptx is set, a
// code=compute_XX for the highest target so newer GPUs can JIT it.
func GencodeArgs(targets []Target, ptx bool) []string {
	var args []string
	for _, t := range targets {
		args = append(args, "-gencode", fmt.Sprintf("arch=%s,code=%s", t.Compute(), t.SM()))
	}
	if ptx && len(targets) > 0 {
		hi := targets[len(targets)-1]
		args = append(args, "-gencode", fmt.Sprintf("arch=%s,code=%s", hi.Compute(), hi.Compute()))
	}
	return args
}
