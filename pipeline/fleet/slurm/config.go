package slurm

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/internal/envlist"
	"github.com/gpuattest/gpuattest/internal/lazyregexp"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

func init() { fleet.Register(Factory{}) }

// Name is the engine's name in a fleet file (engine: slurm).
const Name = "slurm"

// HostSteps values: how a Slurm node runs the steps on the host runner.
const (
	// HostStepsSandboxed runs them under bubblewrap with the shared
	// directory hidden (the default).
	HostStepsSandboxed = dispatch.HostStepsSandboxed
	// HostStepsUnsandboxed runs them as the job's user with no sandbox.
	HostStepsUnsandboxed = dispatch.HostStepsUnsandboxed
)

// Config is the Slurm engine's settings, at a fleet file's top level.
type Config struct {
	// Partition is where the jobs go.
	Partition string `yaml:"partition,omitempty" json:"partition,omitempty" jsonschema:"description=Slurm partition (the cluster's default when omitted)"`
	// SharedDir is the directory the dispatch is staged in.
	SharedDir string `yaml:"sharedDir,omitempty" json:"sharedDir,omitempty" jsonschema:"description=Slurm: absolute path of a directory every node and the submitting machine read and write at the same path"`
	// HostSteps says how a Slurm node runs the steps on the host runner.
	HostSteps string `yaml:"hostSteps,omitempty" json:"hostSteps,omitempty" jsonschema:"enum=sandboxed,enum=unsandboxed,description=Slurm: how the nodes run the gpu steps on the host runner: sandboxed (the default) under bubblewrap with the shared directory hidden so no step can read a job key; unsandboxed for clusters without unprivileged user namespaces (the node statements then say sandbox: none)"`
}

var (
	_ fleet.EngineConfig  = (*Config)(nil)
	_ fleet.SharedStaging = (*Config)(nil)
)

// partitionRE is a partition name, compared lowercase.
var partitionRE = lazyregexp.New(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Validate checks the settings and that every class names its gres,
// and sets each class's Placement (its constraint).
func (c *Config) Validate(ch *fleet.Checker, s *fleet.Spec) {
	if c.Partition != "" && !partitionRE.MatchString(strings.ToLower(c.Partition)) {
		ch.Add("partition", "", "partition %q: expected a Slurm partition name (letters, digits, -)", c.Partition)
	}
	if ch.Required("sharedDir", c.SharedDir, "name a directory the nodes and this machine share, such as /shared/gpuattest") {
		if !filepath.IsAbs(c.SharedDir) || filepath.Clean(c.SharedDir) != c.SharedDir {
			ch.Add("sharedDir", "write it as the nodes see it: an absolute path, such as /shared/gpuattest", "sharedDir %q: expected a clean absolute path", c.SharedDir)
		}
	}
	if c.HostSteps != "" && c.HostSteps != HostStepsSandboxed && c.HostSteps != HostStepsUnsandboxed {
		ch.Add("hostSteps", "sandboxed (the default) or unsandboxed, for clusters without unprivileged user namespaces", "hostSteps %q: expected sandboxed or unsandboxed", c.HostSteps)
	}
	for i, cl := range s.Classes {
		if cl.Gres == "" {
			ch.Required(fmt.Sprintf("classes[%d].gres", i), cl.Gres, "add gres: gpu:TYPE:COUNT, e.g. gpu:h100:8")
		}
		s.Classes[i].Selectors.Placement = Placement{Constraint: cl.Constraint}
	}
}

// SetDefaults sets hostSteps to sandboxed when the file left it out.
func (c *Config) SetDefaults() { c.HostSteps = cmp.Or(c.HostSteps, HostStepsSandboxed) }

// Record names the partition in the dispatch, and an unsandboxed
// hostSteps (a sandboxed one is the record's default).
func (c *Config) Record(f *dispatch.Fleet) {
	f.Partition = c.Partition
	if c.HostSteps == HostStepsUnsandboxed {
		f.HostSteps = HostStepsUnsandboxed
	}
}

// SharedDirectory is where the dispatch is staged: sharedDir.
func (c *Config) SharedDirectory() string { return c.SharedDir }

// Factory makes the Slurm engine (fleet.Register).
type Factory struct{}

var _ fleet.Factory = Factory{}

// Name returns "slurm".
func (Factory) Name() string { return Name }

// Config returns an empty Slurm settings block.
func (Factory) Config() fleet.EngineConfig { return &Config{} }

// DefaultPollInterval returns DefaultPollInterval.
func (Factory) DefaultPollInterval() time.Duration { return DefaultPollInterval }

// Recorded returns the settings of the partition c names.
func (Factory) Recorded(c fleet.Cluster) fleet.EngineConfig {
	return &Config{Partition: c.Partition, HostSteps: HostStepsSandboxed}
}

// New returns an engine that submits to cfg's partition.
func (Factory) New(cfg fleet.EngineConfig, _ fleet.Access) (fleet.Scheduler, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("slurm: settings of type %T, expected *slurm.Config", cfg)
	}
	return New(c.Partition)
}

// NodeIdentity reads the job's ID (JOB_TASK for an array task) and the
// node's name from what slurmd sets in the job's environment.
func (Factory) NodeIdentity(env []string) (jobID, node string) {
	get := func(k string) string { v, _ := envlist.Lookup(env, k); return v }
	arrayTask := get("SLURM_ARRAY_JOB_ID")
	if task := get("SLURM_ARRAY_TASK_ID"); task != "" {
		arrayTask += "_" + task
	}
	return cmp.Or(arrayTask, get("SLURM_JOB_ID")), get("SLURMD_NODENAME")
}
