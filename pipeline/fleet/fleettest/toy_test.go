package fleettest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
)

// toy is an in-process engine: each job is a goroutine that sleeps
// Env["TOY_SLEEP"] and ends with status Env["TOY_EXIT"]. It is the
// smallest engine the fleet takes: its settings, factory and scheduler
// in one file, registered like the real ones.
type toy struct {
	mu   sync.Mutex
	next int
	jobs map[string]*toyJob
}

type toyJob struct {
	status fleet.Status
	cancel context.CancelFunc
}

func (*toy) Name() string { return "toy" }

func (e *toy) Submit(_ context.Context, req fleet.Request) ([]fleet.Handle, error) {
	exit, _ := strconv.Atoi(req.Env["TOY_EXIT"])
	sleep, _ := time.ParseDuration(req.Env["TOY_SLEEP"])
	e.mu.Lock()
	defer e.mu.Unlock()
	hs := make([]fleet.Handle, req.Count)
	for i := range hs {
		e.next++
		id := strconv.Itoa(e.next)
		ctx, cancel := context.WithCancel(context.Background())
		j := &toyJob{status: fleet.Status{ID: id, State: fleet.Running, Node: fmt.Sprintf("toy%d", i), Start: time.Now()}, cancel: cancel}
		e.jobs[id] = j
		go e.run(ctx, j, exit, sleep)
		hs[i] = fleet.Handle{ID: id, Class: req.Class, Index: i}
	}
	return hs, nil
}

func (e *toy) run(ctx context.Context, j *toyJob, exit int, sleep time.Duration) {
	t := time.NewTimer(sleep)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if j.status.State.Final() {
		return
	}
	j.status.State, j.status.ExitCode, j.status.End = fleet.Completed, exit, time.Now()
	if exit != 0 {
		j.status.State = fleet.Failed
	}
}

func (e *toy) Status(_ context.Context, ids []string) (map[string]fleet.Status, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]fleet.Status{}
	for _, id := range ids {
		if j, ok := e.jobs[id]; ok {
			out[id] = j.status
		} else {
			out[id] = fleet.Status{ID: id, State: fleet.Gone}
		}
	}
	return out, nil
}

func (e *toy) Cancel(_ context.Context, ids []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if j, ok := e.jobs[id]; ok && !j.status.State.Final() {
			j.cancel()
			j.status.State, j.status.End = fleet.Cancelled, time.Now()
		}
	}
	return nil
}

func (*toy) Describe(context.Context) (fleet.Cluster, error) {
	return fleet.Cluster{Engine: "toy", Name: "in-process"}, nil
}

// toyConfig is the toy's settings: a toy: block with its shared
// directory.
type toyConfig struct {
	Toy *struct {
		Dir string `yaml:"dir"`
	} `yaml:"toy,omitempty"`
}

func (c *toyConfig) Validate(ch *fleet.Checker, _ *fleet.Spec) {
	if c.Toy == nil {
		ch.Add("toy", "add toy: {dir: /some/dir}", "engine: toy needs a toy: block")
	}
}
func (c *toyConfig) SetDefaults()            {}
func (c *toyConfig) Record(*dispatch.Fleet)  {}
func (c *toyConfig) SharedDirectory() string { return c.Toy.Dir }

type toyFactory struct{}

func (toyFactory) Name() string                               { return "toy" }
func (toyFactory) Config() fleet.EngineConfig                 { return &toyConfig{} }
func (toyFactory) DefaultPollInterval() time.Duration         { return 10 * time.Millisecond }
func (toyFactory) Recorded(fleet.Cluster) fleet.EngineConfig  { return &toyConfig{} }
func (toyFactory) NodeIdentity([]string) (jobID, node string) { return "", "" }
func (toyFactory) New(fleet.EngineConfig, fleet.Access) (fleet.Scheduler, error) {
	return &toy{jobs: map[string]*toyJob{}}, nil
}

func init() { fleet.Register(toyFactory{}) }

func toyRequest(_ *testing.T, class string, count, exit int, d time.Duration) fleet.Request {
	return fleet.Request{Name: "toy-" + class, Class: class, Count: count,
		Env: map[string]string{"TOY_EXIT": strconv.Itoa(exit), "TOY_SLEEP": d.String()}}
}

// TestToyEngine: an engine registered from outside this module's engine
// packages is parsed from a fleet file, opened by name and passes the
// conformance suite, with no cluster.
func TestToyEngine(t *testing.T) {
	spec, err := fleet.Parse("fleet.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: toy\ntoy: {dir: /srv/toy}\n"+
		"classes:\n  - {name: a, gres: gpu:a100:1, targets: [sm_80]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := spec.Config.(*toyConfig); !ok || c.SharedDirectory() != "/srv/toy" {
		t.Fatalf("the toy's settings: %#v", spec.Config)
	}
	if _, err := fleet.Parse("fleet.yaml", []byte("apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: toy\nclasses:\n  - {name: a, gres: gpu:a100:1, targets: [sm_80]}\n")); err == nil {
		t.Error("a toy fleet without its toy: block parsed")
	}
	s, err := fleet.Open("toy", spec.Config, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	fleettest.Run(t, fleettest.Harness{Scheduler: s, Request: toyRequest, Poll: 10 * time.Millisecond, Timeout: 5 * time.Second, Unknown: "0"})
}
