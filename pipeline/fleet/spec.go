package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline"
)

// KindFleet is the kind of a fleet file.
const KindFleet = "Fleet"

// Engines are the engine names a fleet file may give.
var Engines = []string{"slurm"}

// Spec is a fleet file: where the GPU steps of a pipeline run.
//
//	apiVersion: gpuattest.dev/v1
//	kind: Fleet
//	engine: slurm
//	partition: gpu
//	sharedDir: /shared/gpuattest
//	classes:
//	  - name: h100
//	    gres: gpu:h100:8
//	    constraint: sm_90
//	    nodes: 2
//	    targets: [sm_90]
//	    timeLimit: 2h
type Spec struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion" jsonschema:"enum=gpuattest.dev/v1"`
	Kind       string `yaml:"kind" json:"kind" jsonschema:"enum=Fleet"`
	Engine     string `yaml:"engine" json:"engine" jsonschema:"enum=slurm,description=the scheduler the cluster runs"`
	Partition  string `yaml:"partition,omitempty" json:"partition,omitempty" jsonschema:"description=Slurm partition (the cluster's default when omitted)"`
	SharedDir  string `yaml:"sharedDir" json:"sharedDir" jsonschema:"description=absolute path of a directory every node and the submitting machine read and write at the same path"`
	// PollInterval is the least time between two queue polls.
	PollInterval pipeline.Duration `yaml:"pollInterval,omitempty" json:"pollInterval,omitempty" jsonschema:"description=least time between two squeue calls (10s when omitted; 1s at least)"`
	Classes      []Class           `yaml:"classes" json:"classes" jsonschema:"minItems=1"`

	// Path is the file the spec was read from.
	Path string `yaml:"-" json:"-"`
	// Digest is "sha256:<hex>" of the file's bytes.
	Digest string `yaml:"-" json:"-"`
}

// Class is one kind of node: every node of it runs every gpu: true step.
type Class struct {
	Name       string            `yaml:"name" json:"name" jsonschema:"pattern=^[a-z0-9][a-z0-9-]*$"`
	Gres       string            `yaml:"gres" json:"gres" jsonschema:"description=GPUs per node as gpu:TYPE:COUNT such as gpu:h100:8"`
	Constraint string            `yaml:"constraint,omitempty" json:"constraint,omitempty" jsonschema:"description=node features the nodes must have (Slurm --constraint) such as sm_90; an sm_XY feature is also checked against each GPU's compute capability"`
	Nodes      int               `yaml:"nodes,omitempty" json:"nodes,omitempty" jsonschema:"minimum=1,description=how many distinct nodes of the class run the steps (1 when omitted)"`
	Targets    []string          `yaml:"targets" json:"targets" jsonschema:"minItems=1,description=pinned targets of the pipeline this class covers"`
	TimeLimit  pipeline.Duration `yaml:"timeLimit,omitempty" json:"timeLimit,omitempty" jsonschema:"description=each job's time limit (the sum of the gpu steps' timeouts plus 10 minutes when omitted)"`
	GPUModel   string            `yaml:"gpuModel,omitempty" json:"gpuModel,omitempty" jsonschema:"description=text each GPU's name must contain such as H100 (compared case-insensitively; the gres type when omitted)"`

	// Selectors are parsed from Gres, Constraint and Nodes by Load.
	Selectors Selectors `yaml:"-" json:"-"`
}

// Bounds of a fleet file.
const (
	// MaxClasses bounds the classes of a fleet.
	MaxClasses = 64
	// MaxJobs bounds the jobs of a fleet, all classes together.
	MaxJobs = 4096
	// MaxGPUsPerNode bounds a gres count.
	MaxGPUsPerNode = 64
)

// GresPattern is the form of a class's gres: gpu:TYPE:COUNT (a typed
// GPU gres; Slurm refuses count-only ones for typed devices).
const GresPattern = `^gpu:([A-Za-z0-9_.-]{1,64}):([0-9]{1,3})$`

var (
	classNameRE  = lazyregexp.New(`^[a-z0-9][a-z0-9-]{0,62}$`)
	gresRE       = lazyregexp.New(GresPattern)
	constraintRE = lazyregexp.New(`^[A-Za-z0-9_.&|,!()\[\]*-]{1,256}$`)
	featureRE    = lazyregexp.New(`sm_[0-9]{2,3}[af]?`)
)

// Load reads and checks the fleet file at path.
func Load(path string) (*Spec, error) {
	data, err := limits.ReadFile(path, limits.PipelineBytes, "fleet file")
	if err != nil {
		return nil, fmt.Errorf("reading fleet file: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and checks a fleet file from data; path is used in
// messages. Every problem is reported at once, each with its position
// and field path (a pipeline.Problems).
func Parse(path string, data []byte) (*Spec, error) {
	var s Spec
	doc, probs := pipeline.DecodeDocument(path, data, "fleet file", &s)
	if doc == nil {
		return nil, probs
	}
	probs = append(probs, s.validate(doc)...)
	if len(probs) > 0 {
		return nil, probs.Sorted()
	}
	sum := sha256.Sum256(data)
	s.Path, s.Digest = path, "sha256:"+hex.EncodeToString(sum[:])
	for i := range s.Classes {
		if s.Classes[i].Nodes == 0 {
			s.Classes[i].Nodes = 1
		}
	}
	return &s, nil
}

func (s *Spec) validate(doc *pipeline.Document) pipeline.Problems {
	var probs pipeline.Problems
	add := func(path, hint, format string, args ...any) {
		probs = append(probs, doc.Problem(path, hint, format, args...))
	}
	required := func(path, value, hint string) bool {
		if value == "" && !doc.Malformed(path) {
			add(path, hint, "missing %s", path)
		}
		return value != ""
	}
	if required("apiVersion", s.APIVersion, "add apiVersion: "+pipeline.APIVersion) && s.APIVersion != pipeline.APIVersion {
		add("apiVersion", "use apiVersion: "+pipeline.APIVersion, "unsupported apiVersion %q", s.APIVersion)
	}
	if required("kind", s.Kind, "add kind: "+KindFleet) && s.Kind != KindFleet {
		add("kind", "a fleet file has kind: "+KindFleet, "kind %q: expected %s", s.Kind, KindFleet)
	}
	if required("engine", s.Engine, "add engine: slurm") && !slices.Contains(Engines, s.Engine) {
		hint := "expected one of: " + strings.Join(Engines, ", ")
		if s.Engine == "kubernetes" {
			hint = "Kubernetes is not supported yet; use slurm"
		}
		add("engine", hint, "unknown engine %q", s.Engine)
	}
	if s.Partition != "" && !classNameRE.MatchString(strings.ToLower(s.Partition)) {
		add("partition", "", "partition %q: expected a Slurm partition name (letters, digits, -)", s.Partition)
	}
	if required("sharedDir", s.SharedDir, "name a directory the nodes and this machine share, such as /shared/gpuattest") {
		if !filepath.IsAbs(s.SharedDir) || filepath.Clean(s.SharedDir) != s.SharedDir {
			add("sharedDir", "write it as the nodes see it: an absolute path, such as /shared/gpuattest", "sharedDir %q: expected a clean absolute path", s.SharedDir)
		}
	}
	if !s.PollInterval.IsZero() && s.PollInterval.D < time.Second {
		add("pollInterval", "squeue costs the controller; poll every few seconds", "pollInterval %v: expected at least 1s", s.PollInterval.D)
	}
	if len(s.Classes) == 0 && !doc.Malformed("classes") {
		add("classes", "add one class per GPU model, e.g. name: h100, gres: gpu:h100:8, targets: [sm_90]", "a fleet needs at least one class")
	}
	if len(s.Classes) > MaxClasses {
		add("classes", "", "%d classes: at most %d", len(s.Classes), MaxClasses)
	}
	seen := map[string]int{}
	jobs := 0
	for i := range s.Classes {
		c := &s.Classes[i]
		p := fmt.Sprintf("classes[%d]", i)
		if required(p+".name", c.Name, "") {
			if !classNameRE.MatchString(c.Name) {
				add(p+".name", "use lowercase letters, digits and -, such as h100-sxm", "class name %q: expected [a-z0-9][a-z0-9-]*", c.Name)
			} else if j, dup := seen[c.Name]; dup {
				add(p+".name", "", "duplicate class name %q (also classes[%d])", c.Name, j)
			} else {
				seen[c.Name] = i
			}
		}
		if required(p+".gres", c.Gres, "add gres: gpu:TYPE:COUNT, e.g. gpu:h100:8") {
			if m := gresRE.FindStringSubmatch(c.Gres); m == nil {
				add(p+".gres", "write gpu:TYPE:COUNT, e.g. gpu:h100:8; the type is what the cluster's gres.conf calls the model", "gres %q: expected gpu:TYPE:COUNT", c.Gres)
			} else if n, _ := strconv.Atoi(m[2]); n < 1 || n > MaxGPUsPerNode {
				add(p+".gres", "", "gres %q: count %d, expected 1 to %d", c.Gres, n, MaxGPUsPerNode)
			} else {
				c.Selectors.GPUType, c.Selectors.GPUs = m[1], n
			}
		}
		if c.Constraint != "" && !constraintRE.MatchString(c.Constraint) {
			add(p+".constraint", "a Slurm feature expression: sm_90, or sm_90&nvlink", "constraint %q: unexpected characters", c.Constraint)
		}
		c.Selectors.Constraint = c.Constraint
		switch {
		case doc.Malformed(p + ".nodes"):
		case doc.Has(p+".nodes") && c.Nodes < 1:
			add(p+".nodes", "", "nodes %d: expected at least 1", c.Nodes)
		case c.Nodes > MaxJobs:
			add(p+".nodes", "", "nodes %d: at most %d", c.Nodes, MaxJobs)
		default:
			jobs += max(c.Nodes, 1)
		}
		c.Selectors.Distinct = c.Nodes > 1
		if len(c.Targets) == 0 && !doc.Malformed(p+".targets") {
			add(p+".targets", "name the pinned targets this class runs, e.g. [sm_90]", "class %s covers no targets", c.Name)
		}
		for j, t := range c.Targets {
			if _, err := pipeline.ParseTarget(t); err != nil {
				add(fmt.Sprintf("%s.targets[%d]", p, j), "", "%v", err)
			}
		}
		if !c.TimeLimit.IsZero() && c.TimeLimit.D < time.Minute {
			add(p+".timeLimit", "Slurm counts time limits in minutes", "timeLimit %v: expected at least 1m", c.TimeLimit.D)
		}
	}
	if jobs > MaxJobs {
		add("classes", "split the release into several fleets", "%d jobs in all: at most %d", jobs, MaxJobs)
	}
	return probs
}

// Jobs is how many jobs the fleet runs, all classes together.
func (s *Spec) Jobs() int {
	n := 0
	for _, c := range s.Classes {
		n += c.Nodes
	}
	return n
}

// ComputeCapability is the compute capability ("9.0") an sm_XY feature
// of the class's constraint names, or "" when it names none or several.
func (c *Class) ComputeCapability() string {
	ms := featureRE.Regexp().FindAllString(c.Constraint, -1)
	if len(ms) != 1 {
		return ""
	}
	t, err := pipeline.ParseTarget(ms[0])
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d", t.Major, t.Minor)
}

// Model is the text each of the class's GPU names must contain, compared
// case-insensitively: GPUModel, or the gres type.
func (c *Class) Model() string {
	if c.GPUModel != "" {
		return c.GPUModel
	}
	return c.Selectors.GPUType
}
