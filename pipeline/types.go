package pipeline

import "strings"

// APIVersion is the only apiVersion this release of gpuattest reads.
const APIVersion = "gpuattest.dev/v1"

// KindPipeline is the kind of a pipeline document.
const KindPipeline = "Pipeline"

// Pipeline is a declarative pipeline: images, pinned CUDA targets and a DAG
// of steps. Load fills Path, Dir and Digest; the rest comes from YAML.
type Pipeline struct {
	APIVersion  string            `yaml:"apiVersion" json:"apiVersion" jsonschema:"enum=gpuattest.dev/v1"`
	Kind        string            `yaml:"kind" json:"kind" jsonschema:"enum=Pipeline"`
	Name        string            `yaml:"name" json:"name" jsonschema:"pattern=^[a-z0-9][a-z0-9._-]*$"`
	Description string            `yaml:"description,omitempty" json:"description,omitempty"`
	Release     bool              `yaml:"release,omitempty" json:"release,omitempty" jsonschema:"description=refuse floating image tags and a missing or stale lock"`
	Images      map[string]string `yaml:"images,omitempty" json:"images,omitempty" jsonschema:"description=image name to reference (registry ref, oci-layout:PATH[@digest] or docker-archive:PATH)"`
	Targets     []string          `yaml:"targets,omitempty" json:"targets,omitempty" jsonschema:"description=pinned CUDA targets such as sm_80 and sm_90"`
	Runner      string            `yaml:"runner,omitempty" json:"runner,omitempty" jsonschema:"enum=host,enum=docker,enum=bwrap,description=default runner of every step (host when omitted)"`
	Workdir     string            `yaml:"workdir,omitempty" json:"workdir,omitempty" jsonschema:"description=the pipeline's root: where steps run and what every step path stays inside; relative to the pipeline file (its directory when omitted); may be .. for the repository root but not climb above the enclosing git work tree"`
	Env         map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	PassEnv     []string          `yaml:"passEnv,omitempty" json:"passEnv,omitempty" jsonschema:"description=host environment variables passed to every docker and bwrap step (the host runner passes the host environment); signing secrets are never passed"`
	Preflight   *Preflight        `yaml:"preflight,omitempty" json:"preflight,omitempty"`
	Steps       []Step            `yaml:"steps" json:"steps" jsonschema:"minItems=1"`

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
	ID          string            `yaml:"id" json:"id" jsonschema:"pattern=^[a-zA-Z0-9][a-zA-Z0-9_-]*$"`
	Kind        string            `yaml:"kind,omitempty" json:"kind,omitempty" jsonschema:"enum=exec,enum=cuda-build,enum=test,enum=benchmark,enum=burnin,enum=profile,description=step kind (exec when omitted)"`
	Description string            `yaml:"description,omitempty" json:"description,omitempty"`
	Needs       []string          `yaml:"needs,omitempty" json:"needs,omitempty"`
	Runner      string            `yaml:"runner,omitempty" json:"runner,omitempty" jsonschema:"enum=host,enum=docker,enum=bwrap"`
	Image       string            `yaml:"image,omitempty" json:"image,omitempty" jsonschema:"description=name of an entry in images"`
	GPU         bool              `yaml:"gpu,omitempty" json:"gpu,omitempty"`
	Memory      Size              `yaml:"memory,omitempty" json:"memory,omitempty" jsonschema:"description=device memory the step needs (e.g. 8GiB); preflight refuses a GPU with less free"`
	Run         Command           `yaml:"run,omitempty" json:"run,omitempty"`
	Workdir     string            `yaml:"workdir,omitempty" json:"workdir,omitempty" jsonschema:"description=directory the step runs in; relative to the pipeline's workdir and inside it"`
	Env         map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	PassEnv     []string          `yaml:"passEnv,omitempty" json:"passEnv,omitempty" jsonschema:"description=host environment variables passed to this step on docker or bwrap in addition to the pipeline's passEnv"`
	Timeout     Duration          `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Inputs      []string          `yaml:"inputs,omitempty" json:"inputs,omitempty" jsonschema:"description=globs relative to workdir and inside it; their digests key the build cache"`
	Outputs     []string          `yaml:"outputs,omitempty" json:"outputs,omitempty" jsonschema:"description=globs relative to workdir and inside it; recorded; copied into the run directory and cached; a symlink is recorded as a link and must point inside workdir"`
	Interval    Duration          `yaml:"interval,omitempty" json:"interval,omitempty" jsonschema:"description=GPU telemetry sampling interval of a gpu: true step or burn-in (1s when omitted)"`
	Cache       *bool             `yaml:"cache,omitempty" json:"cache,omitempty" jsonschema:"description=false opts a build step out of the cache"`

	// cuda-build

	Sources      []string `yaml:"sources,omitempty" json:"sources,omitempty" jsonschema:"description=cuda-build: .cu files relative to workdir"`
	Flags        []string `yaml:"flags,omitempty" json:"flags,omitempty" jsonschema:"description=cuda-build: extra nvcc flags"`
	Output       string   `yaml:"output,omitempty" json:"output,omitempty" jsonschema:"enum=fatbin,enum=cubin,enum=ptx,enum=object,description=cuda-build: artifact type (fatbin when omitted)"`
	OutDir       string   `yaml:"outDir,omitempty" json:"outDir,omitempty" jsonschema:"description=cuda-build: directory for artifacts relative to workdir (build when omitted)"`
	PTX          *bool    `yaml:"ptx,omitempty" json:"ptx,omitempty" jsonschema:"description=cuda-build: embed PTX for the highest target (true when omitted)"`
	Reproducible string   `yaml:"reproducible,omitempty" json:"reproducible,omitempty" jsonschema:"enum=check,enum=off,description=cuda-build: build twice and compare (off when omitted)"`

	// test, benchmark, burnin

	Results string `yaml:"results,omitempty" json:"results,omitempty" jsonschema:"description=test/benchmark/burnin: results file the command writes (gpuattest results JSON or JUnit XML); relative to workdir and inside it"`
	Format  string `yaml:"format,omitempty" json:"format,omitempty" jsonschema:"enum=auto,enum=gpuattest,enum=junit"`

	// benchmark

	Warmup    *int       `yaml:"warmup,omitempty" json:"warmup,omitempty" jsonschema:"minimum=0,description=benchmark/burnin: untimed iterations per case (GPUATTEST_WARMUP); when omitted the suite's own default applies"`
	Repeats   Repeats    `yaml:"repeats,omitempty" json:"repeats,omitempty"`
	Precision Percent    `yaml:"precision,omitempty" json:"precision,omitempty" jsonschema:"description=benchmark with repeats: auto: stop a case once the 95% confidence interval of its median is within ±precision (1% when omitted)"`
	MaxTime   Duration   `yaml:"maxTime,omitempty" json:"maxTime,omitempty" jsonschema:"description=benchmark with repeats: auto: stop a case after this long even if the precision was not reached (2m when omitted)"`
	Seeds     []int      `yaml:"seeds,omitempty" json:"seeds,omitempty"`
	Baseline  string     `yaml:"baseline,omitempty" json:"baseline,omitempty" jsonschema:"description=benchmark: stored baseline file to compare against (same hardware only); relative to the pipeline file and inside the pipeline's root"`
	Reference *Reference `yaml:"reference,omitempty" json:"reference,omitempty" jsonschema:"description=benchmark: a reference command measured in the same step on the same device, interleaved with the candidate in ABBA blocks"`
	Rounds    int        `yaml:"rounds,omitempty" json:"rounds,omitempty" jsonschema:"minimum=2,maximum=2000,description=benchmark with a reference: invocations of each side, in randomised ABBA blocks (30 when omitted)"`
	Gate      *Gate      `yaml:"gate,omitempty" json:"gate,omitempty"`

	// burnin

	Duration      Duration `yaml:"duration,omitempty" json:"duration,omitempty" jsonschema:"description=burnin: how long to repeat the suite"`
	LeakTolerance Size     `yaml:"leakTolerance,omitempty" json:"leakTolerance,omitempty" jsonschema:"description=burnin: largest memory slope allowed in bytes per iteration or per memory sample (one a second) of a sustained run (e.g. 1MiB)"`
	MinDutyCycle  Percent  `yaml:"minDutyCycle,omitempty" json:"minDutyCycle,omitempty" jsonschema:"description=burnin: lowest busy share of a sustained run's wall time (95% on a GPU when omitted; on the CPU backend only reported unless set)"`
}

// Reference is a benchmark's same-run reference: a second command (the
// previous release's harness and fatbins, the same kernels built from an
// older commit, ...) that writes results with the same case names. With
// Release, the reference runs against a published release: it is pulled
// and verified with Key (and Policy) before the step runs anything, and
// its files are in the directory GPUATTEST_REFERENCE_DIR names.
type Reference struct {
	Run     Command `yaml:"run" json:"run"`
	Results string  `yaml:"results" json:"results" jsonschema:"description=results file the reference command writes, relative to the step's workdir"`
	Release string  `yaml:"release,omitempty" json:"release,omitempty" jsonschema:"description=a published release (gpuattest push) to run the reference against: REGISTRY/REPOSITORY@sha256:<hex> or :TAG, or oci-layout:DIR[@sha256:<hex>] with DIR relative to the pipeline file and inside the pipeline's root; it is pulled and verified before the step runs, and its files are in $GPUATTEST_REFERENCE_DIR"`
	Key     string  `yaml:"key,omitempty" json:"key,omitempty" jsonschema:"description=public key (PEM) the release's attestations must be signed with; relative to the pipeline file and inside the pipeline's root; required with release"`
	Policy  string  `yaml:"policy,omitempty" json:"policy,omitempty" jsonschema:"description=verification policy for the release: builtin:default, builtin:cpu-tier, or a policy file relative to the pipeline file and inside the pipeline's root (builtin:default when omitted: every step passed on real GPUs, every pinned target covered)"`
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
	Threshold             Percent `yaml:"threshold,omitempty" json:"threshold,omitempty" jsonschema:"description=smallest slowdown that counts (3% when omitted)"`
	Alpha                 float64 `yaml:"alpha,omitempty" json:"alpha,omitempty" jsonschema:"description=significance level (0.01 when omitted)"`
	AllowHardwareMismatch bool    `yaml:"allowHardwareMismatch,omitempty" json:"allowHardwareMismatch,omitempty"`
}

// Preflight declares the checks run before any gpu: true step.
type Preflight struct {
	MinDriver          string `yaml:"minDriver,omitempty" json:"minDriver,omitempty" jsonschema:"description=lowest NVIDIA driver version accepted (e.g. 535.104)"`
	RequireECC         *bool  `yaml:"requireECC,omitempty" json:"requireECC,omitempty"`
	AllowMIG           bool   `yaml:"allowMIG,omitempty" json:"allowMIG,omitempty"`
	AllowOtherProcess  bool   `yaml:"allowOtherProcesses,omitempty" json:"allowOtherProcesses,omitempty"`
	RequirePersistence bool   `yaml:"requirePersistence,omitempty" json:"requirePersistence,omitempty"`
}
