package fleet

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
)

// Factory makes one engine. Each engine's package registers its own
// (Register, from its init) and owns everything about it: the settings
// it adds to the fleet file, their defaults and checks, and its
// scheduler. The fleet file's engine: names the factory.
type Factory interface {
	// Name is the engine's name as the fleet file's engine: spells it.
	Name() string
	// Config returns a new, empty settings block: a pointer to a struct
	// whose yaml-tagged fields sit at the fleet file's top level beside
	// the common ones (Spec). Parse decodes into it, checks it with its
	// Validate and then calls its SetDefaults.
	Config() EngineConfig
	// DefaultPollInterval is the least time between two Status calls
	// when the fleet file gives no pollInterval.
	DefaultPollInterval() time.Duration
	// Recorded returns the settings that a fleet record's cluster (what
	// Describe returned at submission) implies, for a coordinator that
	// has no fleet file: gpuattest fleet collect.
	Recorded(c Cluster) EngineConfig
	// New makes the engine's scheduler for cfg, a block this factory's
	// Config or Recorded returned; access are the command line's
	// connection settings.
	New(cfg EngineConfig, access Access) (Scheduler, error)
	// NodeIdentity reads, on a node, the scheduler's name of the job
	// running there and of the node, from the job's environment env
	// (KEY=VALUE); either is "" when the environment does not say.
	NodeIdentity(env []string) (jobID, node string)
}

// EngineConfig is one engine's settings in a fleet file.
type EngineConfig interface {
	// Validate checks the settings, and each class of s as the engine
	// needs it, adding every problem to c. It runs after the common
	// checks, with s.Config set to this block.
	Validate(c *Checker, s *Spec)
	// SetDefaults fills in what the file left out; Parse calls it once
	// the file passed its checks.
	SetDefaults()
	// Record fills the engine's part of the dispatch's fleet record,
	// which the owner signs (the partition, the staging registry, how
	// host steps run).
	Record(f *dispatch.Fleet)
}

// DocumentedDefaults is implemented by an EngineConfig whose settings
// have defaults: the fleet file's schema says each, from the one value
// the engine applies.
type DocumentedDefaults interface {
	// Defaults maps a setting's field path (kubernetes.scheduleTimeout)
	// to its default as the file would spell it (10m).
	Defaults() map[string]string
}

// Access are the command line's settings that reach a cluster, by flag
// name without its dashes (kubeconfig, context): each engine reads the
// ones it knows and ignores the rest.
type Access map[string]string

// Staging capabilities of an EngineConfig: how the dispatch reaches the
// nodes, and how their bundles come back.
type (
	// SharedStaging is an engine's settings whose nodes and coordinator
	// share a directory (Slurm): the dispatch is staged in a new
	// directory under it and the node bundles are read back from there.
	SharedStaging interface {
		SharedDirectory() string
	}
	// RegistryStaging is an engine's settings whose dispatch is pushed
	// to an OCI repository (Kubernetes), its job keys delivered by the
	// engine and its node bundles pulled back by tag.
	RegistryStaging interface {
		StagingRepository() string
	}
)

var registry = struct {
	sync.Mutex
	factories map[string]Factory
	keys      map[string]string // a top-level YAML key: the engine that adds it
}{factories: map[string]Factory{}, keys: map[string]string{}}

// Register adds an engine's factory; engines call it from their init.
// It panics on a second factory of one name, or on a settings block
// whose YAML keys clash with the common ones or another engine's.
func Register(f Factory) {
	registry.Lock()
	defer registry.Unlock()
	name := f.Name()
	if _, dup := registry.factories[name]; dup {
		panic("fleet.Register: a second engine named " + name)
	}
	common := yamlKeys(reflect.TypeFor[Spec]())
	for _, k := range yamlKeys(configType(f)) {
		if slices.Contains(common, k) {
			panic(fmt.Sprintf("fleet.Register: engine %s's setting %q is a common field", name, k))
		}
		if other, dup := registry.keys[k]; dup {
			panic(fmt.Sprintf("fleet.Register: engines %s and %s both set %q", other, name, k))
		}
		registry.keys[k] = name
	}
	registry.factories[name] = f
}

// Lookup returns the factory of the engine named, and whether there is
// one.
func Lookup(name string) (Factory, bool) {
	registry.Lock()
	defer registry.Unlock()
	f, ok := registry.factories[name]
	return f, ok
}

// Factories returns every registered factory, by name.
func Factories() []Factory {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Factory, 0, len(registry.factories))
	for _, f := range registry.factories {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// EngineNames are the registered engines' names, sorted.
func EngineNames() []string {
	var names []string
	for _, f := range Factories() {
		names = append(names, f.Name())
	}
	return names
}

// Open makes the scheduler of the engine named for cfg, spaced by
// Throttle to poll (the engine's DefaultPollInterval when 0).
func Open(name string, cfg EngineConfig, access Access, poll time.Duration) (Scheduler, error) {
	f, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown fleet engine %q: expected one of %s", name, strings.Join(EngineNames(), ", "))
	}
	if cfg == nil {
		return nil, fmt.Errorf("fleet engine %s: no settings", name)
	}
	s, err := f.New(cfg, access)
	if err != nil {
		return nil, err
	}
	if poll <= 0 {
		poll = f.DefaultPollInterval()
	}
	return Throttle(s, poll), nil
}

// configType is the struct type of f's settings block.
func configType(f Factory) reflect.Type {
	t := reflect.TypeOf(f.Config())
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		panic("fleet.Register: engine " + f.Name() + "'s Config is not a pointer to a struct")
	}
	return t.Elem()
}

// yamlKeys are the YAML keys of struct type t's fields.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" && t.Field(i).IsExported() {
			keys = append(keys, name)
		}
	}
	return keys
}

// ConfigTypes returns the struct type of each registered engine's
// settings block, by engine name: for the fleet file's schema.
func ConfigTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for _, f := range Factories() {
		out[f.Name()] = configType(f)
	}
	return out
}

// NodeIdentity reads, on a node, the scheduler's name of the job that
// runs there and of the node from the job's environment env: the first
// registered engine, by name, whose scheduler set them. Both are "" when
// none did.
func NodeIdentity(env []string) (jobID, node string) {
	for _, f := range Factories() {
		if jobID, node = f.NodeIdentity(env); jobID != "" {
			return jobID, node
		}
	}
	return "", ""
}
