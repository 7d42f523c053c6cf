package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
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

// Engines are the engine names a fleet file may give.
var Engines = []string{"slurm", "kubernetes"}

// HostSteps values: how a Slurm node runs the steps on the host runner.
const (
	// HostStepsSandboxed runs them under bubblewrap with the shared
	// directory hidden (the default).
	HostStepsSandboxed = "sandboxed"
	// HostStepsUnsandboxed runs them as the job's user with no sandbox.
	HostStepsUnsandboxed = "unsandboxed"
)

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
// The same file drives Kubernetes with engine: kubernetes and a
// kubernetes: block (Kubernetes); a class then needs its product, and
// Slurm's fields (partition, sharedDir, constraint) are ignored.
type Spec struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion" jsonschema:"enum=gpuattest.dev/v1"`
	Kind       string `yaml:"kind" json:"kind" jsonschema:"enum=Fleet"`
	Engine     string `yaml:"engine" json:"engine" jsonschema:"enum=slurm,enum=kubernetes,description=the scheduler the cluster runs"`
	Partition  string `yaml:"partition,omitempty" json:"partition,omitempty" jsonschema:"description=Slurm partition (the cluster's default when omitted)"`
	SharedDir  string `yaml:"sharedDir,omitempty" json:"sharedDir,omitempty" jsonschema:"description=Slurm: absolute path of a directory every node and the submitting machine read and write at the same path"`
	// HostSteps says how a Slurm node runs the steps on the host runner.
	HostSteps string `yaml:"hostSteps,omitempty" json:"hostSteps,omitempty" jsonschema:"enum=sandboxed,enum=unsandboxed,description=Slurm: how the nodes run the gpu steps on the host runner: sandboxed (the default) under bubblewrap with the shared directory hidden so no step can read a job key; unsandboxed for clusters without unprivileged user namespaces (the node statements then say sandbox: none)"`
	// Kubernetes is the Kubernetes engine's settings.
	Kubernetes *Kubernetes `yaml:"kubernetes,omitempty" json:"kubernetes,omitempty" jsonschema:"description=the Kubernetes engine's settings (engine: kubernetes)"`
	// PollInterval is the least time between two queue polls.
	PollInterval pipeline.Duration `yaml:"pollInterval,omitempty" json:"pollInterval,omitempty" jsonschema:"description=least time between two polls of the scheduler: squeue calls or API reads (10s on Slurm and 5s on Kubernetes when omitted; 1s at least)"`
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
	GPUModel   string            `yaml:"gpuModel,omitempty" json:"gpuModel,omitempty" jsonschema:"description=text each GPU's name must contain such as H100 (compared case-insensitively; the gres type when omitted, else the product's model)"`
	Product    string            `yaml:"product,omitempty" json:"product,omitempty" jsonschema:"description=Kubernetes: the nodes' nvidia.com/gpu.product label such as NVIDIA-H100-80GB-HBM3 (GPU Feature Discovery)"`
	GPUs       int               `yaml:"gpus,omitempty" json:"gpus,omitempty" jsonschema:"minimum=1,description=GPUs per node (the COUNT of gres when omitted; when both are given they must agree)"`
	NodeLabels map[string]string `yaml:"nodeLabels,omitempty" json:"nodeLabels,omitempty" jsonschema:"description=Kubernetes: further labels the nodes must carry (nodeSelector)"`

	// Selectors are parsed from Gres, GPUs, Constraint, Product,
	// NodeLabels and Nodes by Load.
	Selectors Selectors `yaml:"-" json:"-"`
}

// Kubernetes is the kubernetes: block of a fleet file.
type Kubernetes struct {
	Namespace          string            `yaml:"namespace,omitempty" json:"namespace,omitempty" jsonschema:"description=namespace of the Jobs and Secrets (the kubeconfig context's when omitted)"`
	Image              string            `yaml:"image" json:"image" jsonschema:"description=the pod image holding gpuattest and the harness; pin it by digest (REPO@sha256:...)"`
	ImagePullSecrets   []string          `yaml:"imagePullSecrets,omitempty" json:"imagePullSecrets,omitempty" jsonschema:"description=Secrets the pods pull the image with"`
	Registry           string            `yaml:"registry" json:"registry" jsonschema:"description=OCI repository (REGISTRY/REPOSITORY) the dispatch is staged through and the node bundles come back through; this machine and every pod reach it"`
	ServiceAccountName string            `yaml:"serviceAccountName,omitempty" json:"serviceAccountName,omitempty" jsonschema:"description=service account of the pods (the namespace's default when omitted; its token is never mounted)"`
	Kubeconfig         string            `yaml:"kubeconfig,omitempty" json:"kubeconfig,omitempty" jsonschema:"description=kubeconfig file (KUBECONFIG or ~/.kube/config when omitted; --kubeconfig wins)"`
	Context            string            `yaml:"context,omitempty" json:"context,omitempty" jsonschema:"description=kubeconfig context (the current one when omitted; --context wins)"`
	ScheduleTimeout    pipeline.Duration `yaml:"scheduleTimeout,omitempty" json:"scheduleTimeout,omitempty" jsonschema:"description=how long a pod may stay unschedulable before its job is reported failed (10m when omitted)"`
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
	// labelValueRE is a Kubernetes label value (at most 63 characters).
	labelValueRE = lazyregexp.New(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)
	// labelKeyRE is a label key: an optional DNS prefix and a name.
	labelKeyRE = lazyregexp.New(`^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$`)
	// dnsLabelRE is a namespace or a Secret/ServiceAccount name.
	dnsLabelRE = lazyregexp.New(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)
	// repoRE is REGISTRY/REPOSITORY without a tag or digest.
	repoRE = lazyregexp.New(`^[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)+$`)
)

// DefaultScheduleTimeout is how long a Kubernetes pod may stay
// unschedulable before its job counts as failed.
const DefaultScheduleTimeout = 10 * time.Minute

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

// checker collects a document's problems.
type checker struct {
	doc   *pipeline.Document
	probs pipeline.Problems
}

func (c *checker) add(path, hint, format string, args ...any) {
	c.probs = append(c.probs, c.doc.Problem(path, hint, format, args...))
}

// required reports a missing value (unless its node is malformed) and
// says whether it is there.
func (c *checker) required(path, value, hint string) bool {
	if value == "" && !c.doc.Malformed(path) {
		c.add(path, hint, "missing %s", path)
	}
	return value != ""
}

func (s *Spec) validate(doc *pipeline.Document) pipeline.Problems {
	c := &checker{doc: doc}
	add, required := c.add, c.required
	if required("apiVersion", s.APIVersion, "add apiVersion: "+pipeline.APIVersion) && s.APIVersion != pipeline.APIVersion {
		add("apiVersion", "use apiVersion: "+pipeline.APIVersion, "unsupported apiVersion %q", s.APIVersion)
	}
	if required("kind", s.Kind, "add kind: "+KindFleet) && s.Kind != KindFleet {
		add("kind", "a fleet file has kind: "+KindFleet, "kind %q: expected %s", s.Kind, KindFleet)
	}
	if required("engine", s.Engine, "add engine: slurm or engine: kubernetes") && !slices.Contains(Engines, s.Engine) {
		add("engine", "expected one of: "+strings.Join(Engines, ", "), "unknown engine %q", s.Engine)
	}
	switch s.Engine {
	case "slurm":
		s.validateSlurm(c)
	case "kubernetes":
		s.validateKubernetes(c)
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
		jobs += cl.validate(c, p, s.Engine)
	}
	if jobs > MaxJobs {
		add("classes", "split the release into several fleets", "%d jobs in all: at most %d", jobs, MaxJobs)
	}
	return c.probs
}

// validateSlurm checks the fields Slurm needs.
func (s *Spec) validateSlurm(c *checker) {
	if s.Partition != "" && !classNameRE.MatchString(strings.ToLower(s.Partition)) {
		c.add("partition", "", "partition %q: expected a Slurm partition name (letters, digits, -)", s.Partition)
	}
	if c.required("sharedDir", s.SharedDir, "name a directory the nodes and this machine share, such as /shared/gpuattest") {
		if !filepath.IsAbs(s.SharedDir) || filepath.Clean(s.SharedDir) != s.SharedDir {
			c.add("sharedDir", "write it as the nodes see it: an absolute path, such as /shared/gpuattest", "sharedDir %q: expected a clean absolute path", s.SharedDir)
		}
	}
	if s.HostSteps != "" && s.HostSteps != HostStepsSandboxed && s.HostSteps != HostStepsUnsandboxed {
		c.add("hostSteps", "sandboxed (the default) or unsandboxed, for clusters without unprivileged user namespaces", "hostSteps %q: expected sandboxed or unsandboxed", s.HostSteps)
	}
}

// validateKubernetes checks the kubernetes: block.
func (s *Spec) validateKubernetes(c *checker) {
	k := s.Kubernetes
	if k == nil {
		if !c.doc.Malformed("kubernetes") {
			c.add("kubernetes", "add kubernetes: with image: (the pod image) and registry: (the staging repository)", "engine: kubernetes needs a kubernetes: block")
		}
		return
	}
	if k.Namespace != "" && (len(k.Namespace) > 63 || !dnsLabelRE.MatchString(k.Namespace) || strings.Contains(k.Namespace, ".")) {
		c.add("kubernetes.namespace", "a namespace is a DNS label: lowercase letters, digits and -", "namespace %q: expected a DNS label", k.Namespace)
	}
	if c.required("kubernetes.image", k.Image, "name the pod image holding gpuattest and the harness, pinned by digest: REPO@sha256:...") && strings.ContainsAny(k.Image, " \t\n") {
		c.add("kubernetes.image", "", "image %q: expected an image reference", k.Image)
	}
	if c.required("kubernetes.registry", k.Registry, "name an OCI repository this machine and the pods reach, such as registry.example.com/team/gpuattest-staging") && !repoRE.MatchString(k.Registry) {
		c.add("kubernetes.registry", "write REGISTRY/REPOSITORY without a tag or digest, such as registry.example.com/team/staging", "registry %q: expected REGISTRY/REPOSITORY", k.Registry)
	}
	for i, n := range k.ImagePullSecrets {
		if !dnsLabelRE.MatchString(n) {
			c.add(fmt.Sprintf("kubernetes.imagePullSecrets[%d]", i), "", "secret name %q: expected a DNS subdomain", n)
		}
	}
	if k.ServiceAccountName != "" && !dnsLabelRE.MatchString(k.ServiceAccountName) {
		c.add("kubernetes.serviceAccountName", "", "service account %q: expected a DNS subdomain", k.ServiceAccountName)
	}
	if !k.ScheduleTimeout.IsZero() && k.ScheduleTimeout.D < 10*time.Second {
		c.add("kubernetes.scheduleTimeout", "the scheduler needs a few seconds to place a pod", "scheduleTimeout %v: expected at least 10s", k.ScheduleTimeout.D)
	}
}

// validate checks one class (at path p) for engine and returns how many
// jobs it adds.
func (cl *Class) validate(c *checker, p, engine string) int {
	add, doc := c.add, c.doc
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
	case engine == "slurm":
		c.required(p+".gres", cl.Gres, "add gres: gpu:TYPE:COUNT, e.g. gpu:h100:8")
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
	case engine == "kubernetes" && cl.Gres == "":
		add(p+".gpus", "add gpus: N, the nvidia.com/gpu count each pod asks for (or gres: gpu:TYPE:N)", "class %s gives no GPU count", cl.Name)
	}
	if cl.Constraint != "" && !constraintRE.MatchString(cl.Constraint) {
		add(p+".constraint", "a Slurm feature expression: sm_90, or sm_90&nvlink", "constraint %q: unexpected characters", cl.Constraint)
	}
	cl.Selectors.Constraint = cl.Constraint
	cl.validateNodes(c, p, engine)
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

// validateNodes checks the Kubernetes node selection of a class: its
// product label (required on Kubernetes) and further labels.
func (cl *Class) validateNodes(c *checker, p, engine string) {
	if cl.Product != "" && !labelValueRE.MatchString(cl.Product) {
		c.add(p+".product", "the value of the nodes' nvidia.com/gpu.product label, such as NVIDIA-H100-80GB-HBM3 (kubectl get nodes -L nvidia.com/gpu.product)", "product %q: expected a label value", cl.Product)
	} else if engine == "kubernetes" {
		c.required(p+".product", cl.Product, "add product: the nodes' nvidia.com/gpu.product label, such as NVIDIA-H100-80GB-HBM3 (kubectl get nodes -L nvidia.com/gpu.product)")
	}
	cl.Selectors.Product = cl.Product
	if len(cl.NodeLabels) > MaxNodeLabels {
		c.add(p+".nodeLabels", "", "%d labels: at most %d", len(cl.NodeLabels), MaxNodeLabels)
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
			c.add(p+".nodeLabels."+k, "a label key: [prefix/]name", "label key %q: expected a Kubernetes label key", k)
		case k == ProductLabel:
			c.add(p+".nodeLabels."+k, "give it as product:", "label %s is the class's product", k)
		case v != "" && !labelValueRE.MatchString(v):
			c.add(p+".nodeLabels."+k, "", "label value %q: expected a Kubernetes label value", v)
		}
	}
	cl.Selectors.Labels = cl.NodeLabels
}

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
