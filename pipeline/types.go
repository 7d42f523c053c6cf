package pipeline

import "strings"

// APIVersion is the only apiVersion this release of gpuattest reads.
const APIVersion = "gpuattest.dev/v1"

// KindPipeline is the kind of a pipeline document.
const KindPipeline = "Pipeline"

// Pipeline is a declarative pipeline: images, pinned CUDA targets and a DAG
// of steps. Load fills Path, Dir and Digest; the rest comes from YAML.
type Pipeline struct {
	APIVersion  string            `yaml:"apiVersion" json:"apiVersion"`
	Kind        string            `yaml:"kind" json:"kind"`
	Name        string            `yaml:"name" json:"name"`
	Description string            `yaml:"description,omitempty" json:"description,omitempty"`
	Release     bool              `yaml:"release,omitempty" json:"release,omitempty"`
	Images      map[string]string `yaml:"images,omitempty" json:"images,omitempty"`
	Targets     []string          `yaml:"targets,omitempty" json:"targets,omitempty"`
	Runner      string            `yaml:"runner,omitempty" json:"runner,omitempty"`
	Workdir     string            `yaml:"workdir,omitempty" json:"workdir,omitempty"`
	Env         map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	PassEnv     []string          `yaml:"passEnv,omitempty" json:"passEnv,omitempty"`
	Preflight   *Preflight        `yaml:"preflight,omitempty" json:"preflight,omitempty"`
	Steps       []Step            `yaml:"steps" json:"steps"`

	// RequireGPUEvidence fails the run when a GPU gives no evidence signed
	// by its device (or when there is no GPU): see docs/gpu-evidence.md.
	RequireGPUEvidence bool `yaml:"requireGPUEvidence,omitempty" json:"requireGPUEvidence,omitempty"`

	// Path is the file the pipeline was read from.
	Path string `yaml:"-" json:"-"`
	// Dir is the absolute directory of Path.
	Dir string `yaml:"-" json:"-"`
	// Root is the absolute directory steps run in by default: Dir joined
	// with Workdir. Every path a step names stays inside it (see
	// WithRoot for the directory Root itself must stay inside).
	Root string `yaml:"-" json:"-"`
	// Digest is "sha256:<hex>" of the file's bytes.
	Digest string `yaml:"-" json:"-"`
}

// Step is one node of the pipeline DAG. Common fields come first; the
// fields after them belong to one kind each (see kinds.go for which).
type Step struct {
	ID          string            `yaml:"id" json:"id"`
	Kind        string            `yaml:"kind,omitempty" json:"kind,omitempty"`
	Description string            `yaml:"description,omitempty" json:"description,omitempty"`
	Needs       []string          `yaml:"needs,omitempty" json:"needs,omitempty"`
	Runner      string            `yaml:"runner,omitempty" json:"runner,omitempty"`
	Image       string            `yaml:"image,omitempty" json:"image,omitempty"`
	GPU         bool              `yaml:"gpu,omitempty" json:"gpu,omitempty"`
	Memory      Size              `yaml:"memory,omitempty" json:"memory,omitempty"`
	Run         Command           `yaml:"run,omitempty" json:"run,omitempty"`
	Workdir     string            `yaml:"workdir,omitempty" json:"workdir,omitempty"`
	Env         map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	PassEnv     []string          `yaml:"passEnv,omitempty" json:"passEnv,omitempty"`
	Timeout     Duration          `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Inputs      []string          `yaml:"inputs,omitempty" json:"inputs,omitempty"`
	Outputs     []string          `yaml:"outputs,omitempty" json:"outputs,omitempty"`
	Interval    Duration          `yaml:"interval,omitempty" json:"interval,omitempty"`
	Cache       *bool             `yaml:"cache,omitempty" json:"cache,omitempty"`

	// exec

	// HostOnly says an exec step's outputs hold no device code: they are
	// released without the cuobjdump check of the pinned targets, listed
	// as host-only.
	HostOnly bool `yaml:"hostOnly,omitempty" json:"hostOnly,omitempty"`

	// cuda-build

	Sources      []string `yaml:"sources,omitempty" json:"sources,omitempty"`
	Flags        []string `yaml:"flags,omitempty" json:"flags,omitempty"`
	Output       string   `yaml:"output,omitempty" json:"output,omitempty"`
	OutDir       string   `yaml:"outDir,omitempty" json:"outDir,omitempty"`
	PTX          *bool    `yaml:"ptx,omitempty" json:"ptx,omitempty"`
	Reproducible string   `yaml:"reproducible,omitempty" json:"reproducible,omitempty"`

	// test, benchmark, burnin

	Results string `yaml:"results,omitempty" json:"results,omitempty"`
	Format  string `yaml:"format,omitempty" json:"format,omitempty"`

	// test

	// Coverage are coverage reports the test writes (lcov .info,
	// Cobertura XML, Go coverprofile), hashed into the claim with their
	// totals.
	Coverage []string `yaml:"coverage,omitempty" json:"coverage,omitempty"`

	// benchmark

	Warmup    *int       `yaml:"warmup,omitempty" json:"warmup,omitempty"`
	Repeats   Repeats    `yaml:"repeats,omitempty" json:"repeats,omitempty"`
	Precision Percent    `yaml:"precision,omitempty" json:"precision,omitempty"`
	MaxTime   Duration   `yaml:"maxTime,omitempty" json:"maxTime,omitempty"`
	Seeds     []int      `yaml:"seeds,omitempty" json:"seeds,omitempty"`
	Baseline  string     `yaml:"baseline,omitempty" json:"baseline,omitempty"`
	Reference *Reference `yaml:"reference,omitempty" json:"reference,omitempty"`
	Rounds    Rounds     `yaml:"rounds,omitempty" json:"rounds,omitempty"`
	// MaxRounds and RoundsTime are rounds: auto's budget: the most pairs,
	// and how long the pairs may take (within the step's timeout).
	MaxRounds  int      `yaml:"maxRounds,omitempty" json:"maxRounds,omitempty"`
	RoundsTime Duration `yaml:"roundsTime,omitempty" json:"roundsTime,omitempty"`
	Gate       *Gate    `yaml:"gate,omitempty" json:"gate,omitempty"`

	// burnin

	Duration      Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	LeakTolerance Size     `yaml:"leakTolerance,omitempty" json:"leakTolerance,omitempty"`
	MinDutyCycle  Percent  `yaml:"minDutyCycle,omitempty" json:"minDutyCycle,omitempty"`
	// AllowMissingReadings lets a burn-in on a real GPU pass when NVML
	// reports no power, power limit or utilization for it (some VMs,
	// vGPU, MIG): its load is then noted as not judged instead of failing.
	AllowMissingReadings bool `yaml:"allowMissingReadings,omitempty" json:"allowMissingReadings,omitempty"`
}

// Reference is a benchmark's same-run reference: a second command (the
// previous release's harness and fatbins, the same kernels built from an
// older commit, ...) that writes results with the same case names. With
// Release, the reference runs against a published release: it is pulled
// and verified with Key (and Policy) before the step runs anything, and
// its files are in the directory GPUATTEST_REFERENCE_DIR names.
type Reference struct {
	Run     Command `yaml:"run" json:"run"`
	Results string  `yaml:"results" json:"results"`
	Release string  `yaml:"release,omitempty" json:"release,omitempty"`
	Key     string  `yaml:"key,omitempty" json:"key,omitempty"`
	Policy  string  `yaml:"policy,omitempty" json:"policy,omitempty"`
}

// LayoutPrefix starts a reference to an OCI image layout directory
// (oci-layout:DIR[@sha256:<hex>]), as reference.release takes it.
const LayoutPrefix = "oci-layout:"

// LayoutDir returns the directory of an oci-layout:DIR[@sha256:<hex>]
// reference, and false for any other (a registry reference).
func LayoutDir(ref string) (string, bool) {
	spec, ok := strings.CutPrefix(ref, LayoutPrefix)
	if !ok {
		return "", false
	}
	if i := strings.LastIndex(spec, "@"); i >= 0 && strings.HasPrefix(spec[i+1:], "sha256:") {
		spec = spec[:i]
	}
	return spec, true
}

// BuiltinPolicies are the names a benchmark's reference.policy may give
// as builtin:NAME; attest/policy defines them (its tests check the two
// lists agree; the spec does not link the policy engine).
var BuiltinPolicies = []string{"default", "cpu-tier"}

// BuiltinPolicy returns the NAME of a reference.policy written
// builtin:NAME, and whether it is written so (else it is a file).
func (r *Reference) BuiltinPolicy() (string, bool) {
	return strings.CutPrefix(r.Policy, "builtin:")
}

// Gate configures the regression gate of a benchmark step, against its
// reference or its baseline.
type Gate struct {
	Threshold             Percent `yaml:"threshold,omitempty" json:"threshold,omitempty"`
	Alpha                 float64 `yaml:"alpha,omitempty" json:"alpha,omitempty"`
	AllowHardwareMismatch bool    `yaml:"allowHardwareMismatch,omitempty" json:"allowHardwareMismatch,omitempty"`
	// OnAmbiguous is what an AMBIGUOUS verdict of an enforced gate does:
	// OnAmbiguousFail (the default) fails the step, OnAmbiguousWarn lets
	// it pass with a warning (the run then passes with warnings).
	OnAmbiguous string `yaml:"onAmbiguous,omitempty" json:"onAmbiguous,omitempty"`
}

// What an AMBIGUOUS gate verdict does (Gate.OnAmbiguous).
const (
	OnAmbiguousFail = "fail"
	OnAmbiguousWarn = "warn"
)

// WarnsOnAmbiguous reports whether an AMBIGUOUS verdict of gate g only
// warns; a nil gate fails.
func (g *Gate) WarnsOnAmbiguous() bool { return g != nil && g.OnAmbiguous == OnAmbiguousWarn }

// Preflight declares the checks run before any gpu: true step.
type Preflight struct {
	MinDriver          string `yaml:"minDriver,omitempty" json:"minDriver,omitempty"`
	RequireECC         *bool  `yaml:"requireECC,omitempty" json:"requireECC,omitempty"`
	AllowMIG           bool   `yaml:"allowMIG,omitempty" json:"allowMIG,omitempty"`
	AllowOtherProcess  bool   `yaml:"allowOtherProcesses,omitempty" json:"allowOtherProcesses,omitempty"`
	RequirePersistence bool   `yaml:"requirePersistence,omitempty" json:"requirePersistence,omitempty"`
	// RequireFloors fails preflight on a GPU whose model has no floors in
	// gpuattest's table (pipeline/floors): without it such a GPU is
	// warned about and its floors are not judged.
	RequireFloors bool `yaml:"requireFloors,omitempty" json:"requireFloors,omitempty"`
}
