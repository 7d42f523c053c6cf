//go:build unix

package fleettest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// toy is an in-process engine: each job is a process of its script,
// started at once, on a node named toy<index>. It is the smallest
// engine the fleet takes: its settings, factory and scheduler in one
// file, registered like the real ones, staging through a shared
// directory as Slurm does. Its jobs can be killed and preempted
// (toyJobs), so it runs every case of the suite.
type toy struct {
	mu   sync.Mutex
	next int
	jobs map[string]*toyJob
}

type toyJob struct {
	req    fleet.Request
	job    fleet.ScriptJob
	index  int
	status fleet.Status
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd exited
}

func (*toy) Name() string { return "toy" }

func (e *toy) Submit(_ context.Context, req fleet.Request) ([]fleet.Handle, error) {
	job, ok := req.Job.(fleet.ScriptJob)
	if !ok || job.Script == "" {
		return nil, fmt.Errorf("the toy engine runs job scripts on a shared directory: the request's job is %T", req.Job)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	hs := make([]fleet.Handle, req.Count)
	for i := range hs {
		e.next++
		id := strconv.Itoa(e.next)
		j := &toyJob{req: req, job: job, index: i, status: fleet.Status{ID: id, Node: fmt.Sprintf("toy%d", i)}}
		if err := e.start(j); err != nil {
			return nil, err
		}
		e.jobs[id] = j
		hs[i] = fleet.Handle{ID: id, Class: req.Class, Index: i}
	}
	return hs, nil
}

// start starts j's script in a process group of its own; e.mu is held.
func (e *toy) start(j *toyJob) error {
	cmd := exec.Command(j.job.Script, j.job.Args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", fleet.IndexEnv, j.index))
	for k, v := range j.req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if j.job.LogDir != "" {
		if err := os.MkdirAll(j.job.LogDir, 0o700); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(j.job.LogDir, j.status.ID+".log"))
		if err != nil {
			return err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	j.cmd, j.done = cmd, make(chan struct{})
	j.status.State, j.status.Start, j.status.End = fleet.Running, time.Now(), time.Time{}
	go e.wait(j, cmd, j.done)
	return nil
}

// wait records how j's process cmd ended, unless j was stopped or
// started again meanwhile.
func (e *toy) wait(j *toyJob, cmd *exec.Cmd, done chan struct{}) {
	err := cmd.Wait()
	close(done)
	e.mu.Lock()
	defer e.mu.Unlock()
	if j.cmd != cmd || j.status.State.Final() {
		return
	}
	j.status.State, j.status.ExitCode, j.status.End = fleet.Completed, cmd.ProcessState.ExitCode(), time.Now()
	if err != nil {
		j.status.State = fleet.Failed
	}
}

// stop kills j's process group and marks it state with reason, unless
// it ended; it returns when the processes are gone.
func (e *toy) stop(id string, state fleet.State, reason string) {
	e.mu.Lock()
	j, ok := e.jobs[id]
	if !ok || j.status.State.Final() {
		e.mu.Unlock()
		return
	}
	_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	j.status.State, j.status.Reason, j.status.End = state, reason, time.Now()
	done := j.done
	e.mu.Unlock()
	<-done
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
	for _, id := range ids {
		e.stop(id, fleet.Cancelled, "")
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

// New returns the engine TestToyEngine runs, so that the scheduler
// run.Fleet opens and the suite's are one.
func (toyFactory) New(fleet.EngineConfig, fleet.Access) (fleet.Scheduler, error) {
	if e := toyEngine.Load(); e != nil {
		return e, nil
	}
	return &toy{jobs: map[string]*toyJob{}}, nil
}

// toyEngine is the engine the suite runs against.
var toyEngine atomic.Pointer[toy]

func init() { fleet.Register(toyFactory{}) }

func toyRequest(t *testing.T, class string, count, exit int, d time.Duration) fleet.Request {
	return fleet.Request{Name: "toy-" + class, Class: class, Count: count, Job: fleet.ScriptJob{Script: fleettest.SleepScript(t, t.TempDir(), class, exit, d)}}
}

// toyJobs kills and preempts the toy's jobs for the suite.
type toyJobs struct{ e *toy }

// Kill kills job's process group: the job is cancelled, not run again.
func (k toyJobs) Kill(t *testing.T, st *coordinate.State, job string) {
	k.e.stop(fleettest.Job(t, st, job).ID, fleet.Cancelled, "killed")
}

// Preempt kills job's process group and starts its script again, as a
// requeue does.
func (k toyJobs) Preempt(t *testing.T, st *coordinate.State, job string) {
	id := fleettest.Job(t, st, job).ID
	k.e.stop(id, fleet.Preempted, "preempted")
	k.e.mu.Lock()
	defer k.e.mu.Unlock()
	j := k.e.jobs[id]
	j.status.Restarts++
	if err := k.e.start(j); err != nil {
		t.Fatal(err)
	}
}

// toyFleet is the suite's fleet on the toy engine.
const toyFleet = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: toy
toy: {dir: %s}
classes:
  - {name: a100, gres: gpu:a100:1, targets: [sm_80]}
  - {name: h100, gres: gpu:h100:1, targets: [sm_90]}
`

func TestMain(m *testing.M) { fleettest.Main(m) }

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
	e := &toy{jobs: map[string]*toyJob{}}
	toyEngine.Store(e)
	fleettest.Run(t, fleettest.Harness{Scheduler: e, Request: toyRequest, Poll: 10 * time.Millisecond, Timeout: 30 * time.Second, Unknown: "0",
		Jobs: toyJobs{e}, NodesResume: true,
		Fleet: func(t *testing.T) *fleet.Spec {
			shared := testenv.DirOutside(t, "toy-shared-", runner.SandboxScratch)
			spec, err := fleet.Parse("fleet.yaml", fmt.Appendf(nil, toyFleet, shared))
			if err != nil {
				t.Fatal(err)
			}
			return spec
		}})
}
