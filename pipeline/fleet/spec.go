package fleet

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline"
)

// KindFleet is the kind of a fleet file.
const KindFleet = "Fleet"

// Spec is a fleet file: where the GPU steps of a pipeline run.
//
//	apiVersion: gpuattest.dev/v1
//	kind: Fleet
//	engine: slurm
//	partition: gpu
//	sharedDir: /shared/gpuattest
//	hostSteps: sandboxed
//	classes:
//	  - name: h100
//	    gres: gpu:h100:8
//	    constraint: sm_90
//	    product: NVIDIA-H100-80GB-HBM3
//	    nodes: 2
//	    targets: [sm_90]
//	    timeLimit: 2h
//
// The common fields are here; each engine adds its own settings at the
// top level (Slurm: partition, sharedDir, hostSteps; Kubernetes: a
// kubernetes: block), which its package decodes, checks and defaults
// (Factory, EngineConfig). A file may carry the settings of several
// engines; its engine: picks the ones checked and used. A class's
// hardware (gres, gpus, constraint, product, nodeLabels) is common: the
// dispatch records it and verify checks each node against it; which of
// those fields an engine requires is its own check.
type Spec struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion" jsonschema:"enum=gpuattest.dev/v1"`
	Kind       string `yaml:"kind" json:"kind" jsonschema:"enum=Fleet"`
	Engine     string `yaml:"engine" json:"engine" jsonschema:"description=the scheduler the cluster runs"`
	// PollInterval is the least time between two queue polls.
	PollInterval pipeline.Duration `yaml:"pollInterval,omitempty" json:"pollInterval,omitempty" jsonschema:"description=least time between two polls of the scheduler (the engine's default when omitted; 1s at least)"`
	Classes      []Class           `yaml:"classes" json:"classes" jsonschema:"minItems=1"`

	// Config is the settings of the engine the file names: a block its
	// Factory's Config returned, decoded, checked and defaulted.
	Config EngineConfig `yaml:"-" json:"-"`
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
	GPUModel   string            `yaml:"gpuModel,omitempty" json:"gpuModel,omitempty" jsonschema:"description=text each GPU's name must contain such as H100 (compared case-insensitively; the gres type when omitted, else the product's model)"`
	Product    string            `yaml:"product,omitempty" json:"product,omitempty" jsonschema:"description=Kubernetes: the nodes' nvidia.com/gpu.product label such as NVIDIA-H100-80GB-HBM3 (GPU Feature Discovery)"`
	GPUs       int               `yaml:"gpus,omitempty" json:"gpus,omitempty" jsonschema:"minimum=1,description=GPUs per node (the COUNT of gres when omitted; when both are given they must agree)"`
	NodeLabels map[string]string `yaml:"nodeLabels,omitempty" json:"nodeLabels,omitempty" jsonschema:"description=Kubernetes: further labels the nodes must carry (nodeSelector)"`
	Arch       string            `yaml:"arch,omitempty" json:"arch,omitempty" jsonschema:"enum=amd64,enum=arm64,description=the nodes' architecture: the engine selects nodes of it (Slurm: the node feature of that name; Kubernetes: kubernetes.io/arch) and the dispatch stages the gpuattest built for it (amd64 when omitted; the nodes then run where the scheduler places them)"`

	// Selectors are parsed from Gres, GPUs, Nodes and Arch by Load; the
	// engine's own part (Placement) from the fields it reads by its
	// EngineConfig.Validate.
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
	// MaxNodeLabels bounds a class's nodeLabels.
	MaxNodeLabels = 16
)

// GresPattern is the form of a class's gres: gpu:TYPE:COUNT (a typed
// GPU gres; Slurm refuses count-only ones for typed devices).
const GresPattern = `^gpu:([A-Za-z0-9_.-]{1,64}):([0-9]{1,3})$`

var (
	classNameRE  = lazyregexp.New(`^[a-z0-9][a-z0-9-]{0,62}$`)
	gresRE       = lazyregexp.New(GresPattern)
	constraintRE = lazyregexp.New(`^[A-Za-z0-9_.&|,!()\[\]*-]{1,256}$`)
	featureRE    = lazyregexp.New(`sm_[0-9]{2,3}[af]?`)
	// labelValueRE is a node label value (at most 63 characters).
	labelValueRE = lazyregexp.New(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)
	// labelKeyRE is a label key: an optional DNS prefix and a name.
	labelKeyRE = lazyregexp.New(`^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)
)

// Load reads and checks the fleet file at path. The engines it may name
// are those registered (Register): a program that reads fleet files
// imports pipeline/fleet/engines, or the engines it supports.
func Load(path string) (*Spec, error) {
	data, err := limits.ReadFile(path, limits.PipelineBytes, "fleet file")
	if err != nil {
		return nil, fmt.Errorf("reading fleet file: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and checks a fleet file from data; path is used in
// messages. Every problem is reported at once, each with its position
// and field path (a pipeline.Problems). The settings of every registered
// engine may appear; the engine's own are checked, defaulted and kept in
// Config.
func Parse(path string, data []byte) (*Spec, error) {
	factories := Factories()
	fields := []reflect.StructField{{Name: "Common", Type: reflect.TypeFor[Spec](), Tag: `yaml:",inline"`}}
	for i, f := range factories {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Engine%d", i), Type: configType(f), Tag: `yaml:",inline"`})
	}
	v := reflect.New(reflect.StructOf(fields)).Elem()
	doc, probs := pipeline.DecodeDocument(path, data, "fleet file", v.Addr().Interface())
	if doc == nil {
		return nil, probs
	}
	s := v.Field(0).Interface().(Spec)
	for i, f := range factories {
		if f.Name() == s.Engine {
			s.Config = v.Field(i + 1).Addr().Interface().(EngineConfig)
		}
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
	s.Config.SetDefaults()
	return &s, nil
}

// Checker collects a fleet file's problems, each placed at its field
// path: the common checks and each engine's (EngineConfig.Validate).
type Checker struct {
	doc   *pipeline.Document
	probs pipeline.Problems
}

// Add reports a problem at the field path (such as
// classes[1].gres), with a hint ("" for none).
func (c *Checker) Add(path, hint, format string, args ...any) {
	c.probs = append(c.probs, c.doc.Problem(path, hint, format, args...))
}

// Required reports a missing value at path (unless its node is
// malformed, which was reported already) and says whether it is there.
func (c *Checker) Required(path, value, hint string) bool {
	if value == "" && !c.doc.Malformed(path) {
		c.Add(path, hint, "missing %s", path)
	}
	return value != ""
}

// Has reports whether the file set the field at path.
func (c *Checker) Has(path string) bool { return c.doc.Has(path) }

// Malformed reports whether the field at path had the wrong type (its
// problem is reported already).
func (c *Checker) Malformed(path string) bool { return c.doc.Malformed(path) }

func (s *Spec) validate(doc *pipeline.Document) pipeline.Problems {
	c := &Checker{doc: doc}
	add, required := c.Add, c.Required
	if required("apiVersion", s.APIVersion, "add apiVersion: "+pipeline.APIVersion) && s.APIVersion != pipeline.APIVersion {
		add("apiVersion", "use apiVersion: "+pipeline.APIVersion, "unsupported apiVersion %q", s.APIVersion)
	}
	if required("kind", s.Kind, "add kind: "+KindFleet) && s.Kind != KindFleet {
		add("kind", "a fleet file has kind: "+KindFleet, "kind %q: expected %s", s.Kind, KindFleet)
	}
	names := EngineNames()
	if required("engine", s.Engine, "add engine: "+strings.Join(names, " or engine: ")) && s.Config == nil {
		add("engine", "expected one of: "+strings.Join(names, ", "), "unknown engine %q", s.Engine)
	}
	if !s.PollInterval.IsZero() && s.PollInterval.D < time.Second {
		add("pollInterval", "polling costs the controller; poll every few seconds", "pollInterval %v: expected at least 1s", s.PollInterval.D)
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
		cl := &s.Classes[i]
		p := fmt.Sprintf("classes[%d]", i)
		if required(p+".name", cl.Name, "") {
			if !classNameRE.MatchString(cl.Name) {
				add(p+".name", "use lowercase letters, digits and -, such as h100-sxm", "class name %q: expected [a-z0-9][a-z0-9-]*", cl.Name)
			} else if j, dup := seen[cl.Name]; dup {
				add(p+".name", "", "duplicate class name %q (also classes[%d])", cl.Name, j)
			} else {
				seen[cl.Name] = i
			}
		}
		jobs += cl.validate(c, p)
	}
	if jobs > MaxJobs {
		add("classes", "split the release into several fleets", "%d jobs in all: at most %d", jobs, MaxJobs)
	}
	if s.Config != nil {
		s.Config.Validate(c, s)
	}
	return c.probs
}

// validate checks one class (at path p) and returns how many jobs it
// adds. Which of its hardware fields an engine requires is the engine's
// check.
func (cl *Class) validate(c *Checker, p string) int {
	add, doc := c.Add, c.doc
	gresCount := 0
	switch {
	case cl.Gres != "":
		if m := gresRE.FindStringSubmatch(cl.Gres); m == nil {
			add(p+".gres", "write gpu:TYPE:COUNT, e.g. gpu:h100:8; the type is what the cluster's gres.conf calls the model", "gres %q: expected gpu:TYPE:COUNT", cl.Gres)
		} else if n, _ := strconv.Atoi(m[2]); n < 1 || n > MaxGPUsPerNode {
			add(p+".gres", "", "gres %q: count %d, expected 1 to %d", cl.Gres, n, MaxGPUsPerNode)
		} else {
			cl.Selectors.GPUType, gresCount = m[1], n
		}
	}
	cl.Selectors.GPUs = gresCount
	switch {
	case doc.Malformed(p + ".gpus"):
	case doc.Has(p+".gpus") && (cl.GPUs < 1 || cl.GPUs > MaxGPUsPerNode):
		add(p+".gpus", "", "gpus %d: expected 1 to %d", cl.GPUs, MaxGPUsPerNode)
	case cl.GPUs > 0 && gresCount > 0 && cl.GPUs != gresCount:
		add(p+".gpus", "give the count once, or make gres and gpus agree", "gpus %d, but gres %q asks for %d", cl.GPUs, cl.Gres, gresCount)
	case cl.GPUs > 0:
		cl.Selectors.GPUs = cl.GPUs
	}
	if cl.Constraint != "" && !constraintRE.MatchString(cl.Constraint) {
		add(p+".constraint", "a Slurm feature expression: sm_90, or sm_90&nvlink", "constraint %q: unexpected characters", cl.Constraint)
	}
	cl.validateNodes(c, p)
	jobs := 0
	switch {
	case doc.Malformed(p + ".nodes"):
	case doc.Has(p+".nodes") && cl.Nodes < 1:
		add(p+".nodes", "", "nodes %d: expected at least 1", cl.Nodes)
	case cl.Nodes > MaxJobs:
		add(p+".nodes", "", "nodes %d: at most %d", cl.Nodes, MaxJobs)
	default:
		jobs = max(cl.Nodes, 1)
	}
	cl.Selectors.Distinct = cl.Nodes > 1
	if cl.Arch != "" && !slices.Contains(Arches, cl.Arch) {
		add(p+".arch", "the architecture as Go spells it: "+strings.Join(Arches, " or "), "arch %q: expected one of %s", cl.Arch, strings.Join(Arches, ", "))
	}
	cl.Selectors.Arch = cl.Arch
	if len(cl.Targets) == 0 && !doc.Malformed(p+".targets") {
		add(p+".targets", "name the pinned targets this class runs, e.g. [sm_90]", "class %s covers no targets", cl.Name)
	}
	for j, t := range cl.Targets {
		if _, err := pipeline.ParseTarget(t); err != nil {
			add(fmt.Sprintf("%s.targets[%d]", p, j), "", "%v", err)
		}
	}
	if !cl.TimeLimit.IsZero() && cl.TimeLimit.D < time.Minute {
		add(p+".timeLimit", "Slurm counts time limits in minutes", "timeLimit %v: expected at least 1m", cl.TimeLimit.D)
	}
	return jobs
}

// validateNodes checks the node labels of a class: its product label
// and further labels.
func (cl *Class) validateNodes(c *Checker, p string) {
	if cl.Product != "" && !labelValueRE.MatchString(cl.Product) {
		c.Add(p+".product", "the value of the nodes' nvidia.com/gpu.product label, such as NVIDIA-H100-80GB-HBM3 (kubectl get nodes -L nvidia.com/gpu.product)", "product %q: expected a label value", cl.Product)
	}
	if len(cl.NodeLabels) > MaxNodeLabels {
		c.Add(p+".nodeLabels", "", "%d labels: at most %d", len(cl.NodeLabels), MaxNodeLabels)
		return
	}
	keys := make([]string, 0, len(cl.NodeLabels))
	for k := range cl.NodeLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := cl.NodeLabels[k]
		switch {
		case !labelKeyRE.MatchString(k):
			c.Add(p+".nodeLabels."+k, "a label key: [prefix/]name", "label key %q: expected a Kubernetes label key", k)
		case k == ProductLabel:
			c.Add(p+".nodeLabels."+k, "give it as product:", "label %s is the class's product", k)
		case v != "" && !labelValueRE.MatchString(v):
			c.Add(p+".nodeLabels."+k, "", "label value %q: expected a Kubernetes label value", v)
		}
	}
}

// Arches are the node architectures a class may name, as Go spells
// them; DefaultArch is a class's when it names none.
var Arches = []string{"amd64", "arm64"}

// DefaultArch is the architecture of a class that names none.
const DefaultArch = "amd64"

// Architecture is the class's node architecture: Arch, or DefaultArch.
func (c *Class) Architecture() string { return cmp.Or(c.Arch, DefaultArch) }

// Platform is the GOOS/GOARCH of the gpuattest the class's nodes run
// (linux/amd64).
func (c *Class) Platform() string { return Platform(c.Arch) }

// Platform is the GOOS/GOARCH of the gpuattest that nodes of
// architecture arch run: linux/ARCH, DefaultArch when arch is empty.
func Platform(arch string) string { return "linux/" + cmp.Or(arch, DefaultArch) }

// ProductLabel is the node label GPU Feature Discovery sets to the GPU's
// product name.
const ProductLabel = "nvidia.com/gpu.product"

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
// case-insensitively: GPUModel, or the gres type, or the model in the
// product label (H100 in NVIDIA-H100-80GB-HBM3).
func (c *Class) Model() string {
	if c.GPUModel != "" {
		return c.GPUModel
	}
	if c.Selectors.GPUType != "" {
		return c.Selectors.GPUType
	}
	parts := strings.Split(c.Product, "-")
	if len(parts) > 1 && strings.EqualFold(parts[0], "NVIDIA") {
		return parts[1]
	}
	return c.Product
}
