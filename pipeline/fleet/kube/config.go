package kube

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/internal/envlist"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

func init() { fleet.Register(Factory{}) }

// Name is the engine's name in a fleet file (engine: kubernetes).
const Name = "kubernetes"

// DefaultScheduleTimeout is how long a pod may stay unschedulable
// before its job counts as failed, when the fleet file gives no
// kubernetes.scheduleTimeout.
const DefaultScheduleTimeout = 10 * time.Minute

// FleetConfig is the Kubernetes engine's settings at a fleet file's top
// level: its kubernetes: block.
type FleetConfig struct {
	// Kubernetes is the kubernetes: block.
	Kubernetes *Settings `yaml:"kubernetes,omitempty" json:"kubernetes,omitempty" jsonschema:"description=the Kubernetes engine's settings (engine: kubernetes)"`
}

// Settings is the kubernetes: block of a fleet file.
type Settings struct {
	Namespace          string            `yaml:"namespace,omitempty" json:"namespace,omitempty" jsonschema:"description=namespace of the Jobs and Secrets (the kubeconfig context's when omitted)"`
	Image              string            `yaml:"image" json:"image" jsonschema:"description=the pod image holding gpuattest and the harness; pin it by digest (REPO@sha256:...)"`
	ImagePullSecrets   []string          `yaml:"imagePullSecrets,omitempty" json:"imagePullSecrets,omitempty" jsonschema:"description=Secrets the pods pull the image with"`
	Registry           string            `yaml:"registry" json:"registry" jsonschema:"description=OCI repository (REGISTRY/REPOSITORY) the dispatch is staged through and the node bundles come back through; this machine and every pod reach it"`
	ServiceAccountName string            `yaml:"serviceAccountName,omitempty" json:"serviceAccountName,omitempty" jsonschema:"description=service account of the pods (the namespace's default when omitted; its token is never mounted)"`
	Kubeconfig         string            `yaml:"kubeconfig,omitempty" json:"kubeconfig,omitempty" jsonschema:"description=kubeconfig file (KUBECONFIG or ~/.kube/config when omitted; --kubeconfig wins)"`
	Context            string            `yaml:"context,omitempty" json:"context,omitempty" jsonschema:"description=kubeconfig context (the current one when omitted; --context wins)"`
	ScheduleTimeout    pipeline.Duration `yaml:"scheduleTimeout,omitempty" json:"scheduleTimeout,omitempty" jsonschema:"description=how long a pod may stay unschedulable before its job is reported failed"`
}

var (
	_ fleet.EngineConfig       = (*FleetConfig)(nil)
	_ fleet.RegistryStaging    = (*FleetConfig)(nil)
	_ fleet.DocumentedDefaults = (*FleetConfig)(nil)
)

var (
	// dnsLabelRE is a namespace or a Secret/ServiceAccount name.
	dnsLabelRE = lazyregexp.New(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)
	// repoRE is REGISTRY/REPOSITORY without a tag or digest.
	repoRE = lazyregexp.New(`^[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)+$`)
)

// Validate checks the kubernetes: block, and that every class names its
// product and a GPU count, and sets each class's Placement (its product
// and node labels).
func (c *FleetConfig) Validate(ch *fleet.Checker, s *fleet.Spec) {
	for i, cl := range s.Classes {
		p := fmt.Sprintf("classes[%d]", i)
		s.Classes[i].Selectors.Placement = Placement{Product: cl.Product, Labels: cl.NodeLabels}
		if _, ok := cl.NodeLabels[ArchLabel]; ok {
			ch.Add(p+".nodeLabels."+ArchLabel, "give it as arch:", "label %s is the class's arch", ArchLabel)
		}
		if cl.Gres == "" && cl.GPUs == 0 && !ch.Has(p+".gpus") && !ch.Malformed(p+".gpus") {
			ch.Add(p+".gpus", "add gpus: N, the nvidia.com/gpu count each pod asks for (or gres: gpu:TYPE:N)", "class %s gives no GPU count", cl.Name)
		}
		if cl.Product == "" {
			ch.Required(p+".product", cl.Product, "add product: the nodes' nvidia.com/gpu.product label, such as NVIDIA-H100-80GB-HBM3 (kubectl get nodes -L nvidia.com/gpu.product)")
		}
	}
	k := c.Kubernetes
	if k == nil {
		if !ch.Malformed("kubernetes") {
			ch.Add("kubernetes", "add kubernetes: with image: (the pod image) and registry: (the staging repository)", "engine: kubernetes needs a kubernetes: block")
		}
		return
	}
	if k.Namespace != "" && (len(k.Namespace) > 63 || !dnsLabelRE.MatchString(k.Namespace) || strings.Contains(k.Namespace, ".")) {
		ch.Add("kubernetes.namespace", "a namespace is a DNS label: lowercase letters, digits and -", "namespace %q: expected a DNS label", k.Namespace)
	}
	if ch.Required("kubernetes.image", k.Image, "name the pod image holding gpuattest and the harness, pinned by digest: REPO@sha256:...") && strings.ContainsAny(k.Image, " \t\n") {
		ch.Add("kubernetes.image", "", "image %q: expected an image reference", k.Image)
	}
	if ch.Required("kubernetes.registry", k.Registry, "name an OCI repository this machine and the pods reach, such as registry.example.com/team/gpuattest-staging") && !repoRE.MatchString(k.Registry) {
		ch.Add("kubernetes.registry", "write REGISTRY/REPOSITORY without a tag or digest, such as registry.example.com/team/staging", "registry %q: expected REGISTRY/REPOSITORY", k.Registry)
	}
	for i, n := range k.ImagePullSecrets {
		if !dnsLabelRE.MatchString(n) {
			ch.Add(fmt.Sprintf("kubernetes.imagePullSecrets[%d]", i), "", "secret name %q: expected a DNS subdomain", n)
		}
	}
	if k.ServiceAccountName != "" && !dnsLabelRE.MatchString(k.ServiceAccountName) {
		ch.Add("kubernetes.serviceAccountName", "", "service account %q: expected a DNS subdomain", k.ServiceAccountName)
	}
	if !k.ScheduleTimeout.IsZero() && k.ScheduleTimeout.D < 10*time.Second {
		ch.Add("kubernetes.scheduleTimeout", "the scheduler needs a few seconds to place a pod", "scheduleTimeout %v: expected at least 10s", k.ScheduleTimeout.D)
	}
}

// SetDefaults sets scheduleTimeout to DefaultScheduleTimeout when the
// file left it out.
func (c *FleetConfig) SetDefaults() {
	if c.Kubernetes == nil {
		c.Kubernetes = &Settings{}
	}
	if c.Kubernetes.ScheduleTimeout.IsZero() {
		c.Kubernetes.ScheduleTimeout = pipeline.Duration{D: DefaultScheduleTimeout}
	}
}

// Defaults says the schedule timeout's default, for the schema.
func (c *FleetConfig) Defaults() map[string]string {
	return map[string]string{"kubernetes.scheduleTimeout": fleet.FormatDuration(DefaultScheduleTimeout)}
}

// Record names the staging registry in the dispatch.
func (c *FleetConfig) Record(f *dispatch.Fleet) {
	if c.Kubernetes != nil {
		f.Registry = c.Kubernetes.Registry
	}
}

// StagingRepository is the repository the dispatch is staged through.
func (c *FleetConfig) StagingRepository() string {
	if c.Kubernetes == nil {
		return ""
	}
	return c.Kubernetes.Registry
}

// Factory makes the Kubernetes engine (fleet.Register).
type Factory struct{}

var _ fleet.Factory = Factory{}

// Name returns "kubernetes".
func (Factory) Name() string { return Name }

// Config returns an empty Kubernetes settings block.
func (Factory) Config() fleet.EngineConfig { return &FleetConfig{} }

// DefaultPollInterval returns DefaultPollInterval.
func (Factory) DefaultPollInterval() time.Duration { return DefaultPollInterval }

// Recorded returns the settings of the namespace c names.
func (Factory) Recorded(c fleet.Cluster) fleet.EngineConfig {
	fc := &FleetConfig{Kubernetes: &Settings{Namespace: c.Namespace}}
	fc.SetDefaults()
	return fc
}

// New returns an engine for cfg, reaching the cluster through the
// kubeconfig file and context access names ("kubeconfig", "context"),
// which win over the file's.
// GPUATTEST_FLEET_SCHEDULE_TIMEOUT, for tests, overrides the schedule
// timeout.
func (Factory) New(cfg fleet.EngineConfig, access fleet.Access) (fleet.Scheduler, error) {
	fc, ok := cfg.(*FleetConfig)
	if !ok {
		return nil, fmt.Errorf("kubernetes: settings of type %T, expected *kube.FleetConfig", cfg)
	}
	k := fc.Kubernetes
	if k == nil {
		k = &Settings{}
	}
	opts := []Option{
		WithKubeconfig(cmp.Or(access["kubeconfig"], k.Kubeconfig)),
		WithContext(cmp.Or(access["context"], k.Context)),
	}
	if !k.ScheduleTimeout.IsZero() {
		opts = append(opts, WithScheduleTimeout(k.ScheduleTimeout.D))
	}
	if v := os.Getenv("GPUATTEST_FLEET_SCHEDULE_TIMEOUT"); v != "" { // tests wait less
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("GPUATTEST_FLEET_SCHEDULE_TIMEOUT=%q: %w", v, err)
		}
		opts = append(opts, WithScheduleTimeout(d))
	}
	return New(Config{Namespace: k.Namespace, Image: k.Image, ImagePullSecrets: k.ImagePullSecrets, ServiceAccount: k.ServiceAccountName}, opts...)
}

// NodeIdentity reads the job's ID (JOB/INDEX) and the node's name from
// the pod's environment (fleet.JobEnv, fleet.IndexEnv, fleet.NodeEnv);
// both are "" outside a fleet job's pod.
func (Factory) NodeIdentity(env []string) (jobID, node string) {
	job, ok := envlist.Lookup(env, fleet.JobEnv)
	if !ok || job == "" {
		return "", ""
	}
	idx, _ := envlist.Lookup(env, fleet.IndexEnv)
	node, _ = envlist.Lookup(env, fleet.NodeEnv)
	return job + "/" + idx, node
}
