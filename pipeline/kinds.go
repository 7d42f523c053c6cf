package pipeline

import (
	"fmt"
	"sort"
)

// Step kinds. Adding a kind is an entry in kinds below (which fields it
// takes, whether it runs a command, whether it may be cached) plus its
// executor in the engine's table.
const (
	KindExec      = "exec"
	KindCUDABuild = "cuda-build"
	KindTest      = "test"
	KindBenchmark = "benchmark"
	KindBurnin    = "burnin"
	KindProfile   = "profile"
)

// kindSpec describes one step kind for validation and defaults.
type kindSpec struct {
	// fields are the kind-specific YAML fields it accepts (common fields
	// are always accepted).
	fields []string
	// run: whether `run` is required (true), forbidden (false).
	run bool
	// cacheable: whether results may come from the build cache.
	cacheable bool
	// validate checks the kind's own fields.
	validate func(v *validator, i int, s *Step)
}

var kinds = map[string]kindSpec{
	KindExec:      {fields: []string{"hostOnly", "reproducible"}, run: true, cacheable: true, validate: validateExec},
	KindCUDABuild: {fields: []string{"sources", "flags", "output", "outDir", "ptx", "reproducible"}, cacheable: true, validate: validateCUDABuild},
	KindTest:      {fields: []string{"results", "format", "coverage"}, run: true, validate: validateSuite},
	KindBenchmark: {fields: []string{"results", "format", "warmup", "repeats", "precision", "maxTime", "seeds", "baseline", "reference", "rounds", "gate"}, run: true, validate: validateBenchmark},
	KindBurnin:    {fields: []string{"results", "format", "duration", "leakTolerance", "minDutyCycle", "allowMissingReadings", "warmup", "repeats", "seeds"}, run: true, validate: validateBurnin},
	KindProfile:   {run: true},
}

// validateExec checks an exec step's reproducible: check or off, and
// only with outputs to compare.
func validateExec(v *validator, i int, s *Step) {
	path := fmt.Sprintf("steps[%d]", i)
	switch s.Reproducible {
	case "", "off":
	case "check":
		if len(s.Outputs) == 0 {
			v.add(path+".reproducible", false, "declare the files the command builds as outputs: they are what the two builds compare", "step %q: reproducible: check needs outputs to compare", s.ID)
		}
	default:
		v.add(path+".reproducible", false, "", "unknown value %q: expected check or off", s.Reproducible)
	}
}

// kindFields are every kind-specific field, to report one used on the
// wrong kind.
var kindFields = func() map[string][]string {
	m := map[string][]string{}
	for name, k := range kinds {
		for _, f := range k.fields {
			m[f] = append(m[f], name)
		}
	}
	for _, v := range m {
		sort.Strings(v)
	}
	return m
}()

// Kinds returns the names of every step kind, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Cacheable reports whether a step's results may come from the build
// cache: build kinds unless `cache: false`; tests, benchmarks, burn-ins and
// profiles never.
func (s *Step) Cacheable() bool {
	k, ok := kinds[s.Kind]
	if !ok || !k.cacheable {
		return false
	}
	return s.Cache == nil || *s.Cache
}
