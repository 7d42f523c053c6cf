package fleettest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// Killer is a harness whose cluster can kill a running job so that it
// ends without a node bundle and is not run again (Slurm: scancel
// --signal=KILL; Kubernetes: its pod fails before it signs).
type Killer interface {
	// Kill kills job (class-index) of the dispatch recorded in st, which
	// runs.
	Kill(t *testing.T, st *coordinate.State, job string)
}

// Preempter is a harness whose cluster can preempt a running job: stop
// it and run it again, as a scheduler's preemption with requeue, or an
// eviction, does (Slurm: SIGKILL and scontrol requeue; Kubernetes: the
// pod evicted).
type Preempter interface {
	// Preempt stops job (class-index) of the dispatch recorded in st,
	// which runs its GPU step, and has the scheduler run it again.
	Preempt(t *testing.T, st *coordinate.State, job string)
}

// pipelineYAML is Pipeline's text: the name, the GPU step's further
// lines and its run.
const pipelineYAML = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: %s
targets: [sm_80, sm_90]
steps:
  - id: build
    run: mkdir -p out && echo kernel > out/kernels.fatbin && printf '#!/bin/sh\necho harness ok\n' > out/harness && chmod +x out/harness
    outputs: [out/kernels.fatbin, out/harness]
  - id: check
    gpu: true
    needs: [build]
%s    run: %s
`

// Pipeline is the pipeline of the fleet's tests, named name: it builds
// once here (a fake fatbin and a harness, its outputs) and runs one GPU
// step, check, on every node, which runs the harness, checks the fatbin
// and then runs more (unless empty); lines are further lines of the
// step, each indented four spaces (memory: 60GiB).
func Pipeline(name, lines, more string) string {
	run := `./out/harness && test "$(cat out/kernels.fatbin)" = kernel`
	if more != "" {
		run += " && " + more
	}
	return fmt.Sprintf(pipelineYAML, name, lines, run)
}

// The two jobs of the suite's fleet.
const (
	jobA100 = "a100-0"
	jobH100 = "h100-0"
)

// e2e is one end-to-end case's dispatch: its pipeline, fleet, run
// directory and options.
type e2e struct {
	h    Harness
	p    *pipeline.Pipeline
	spec *fleet.Spec
	dir  string
	opts []run.FleetOption
}

// newE2E writes the suite's pipeline, whose GPU step runs more after its
// checks and has further lines, and the options of a run of it on the
// harness's fleet.
func newE2E(t *testing.T, h Harness, more, lines string) *e2e {
	t.Helper()
	proj := t.TempDir()
	path := filepath.Join(proj, "p.yaml")
	if err := os.WriteFile(path, []byte(Pipeline("fleet-suite", lines, more)), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	spec := h.Fleet(t)
	var names []string
	for _, c := range spec.Classes {
		names = append(names, fmt.Sprintf("%s:%s:%d", c.Name, c.Gres, c.Nodes))
	}
	if got := strings.Join(names, " "); got != "a100:gpu:a100:1:1 h100:gpu:h100:1:1" {
		t.Fatalf("the harness's fleet has classes %s; the suite needs a100 (gres gpu:a100:1) and h100 (gres gpu:h100:1), one node each", got)
	}
	signer := OwnerSigner(t)
	e := &e2e{h: h, p: p, spec: spec, dir: filepath.Join(t.TempDir(), "run")}
	e.opts = append([]run.FleetOption{
		run.WithFleetDir(e.dir), run.WithFleetSigner(func() (*sign.Signer, error) { return signer, nil }),
		run.WithNodeBinary(NodeBinary(t)), run.WithSimulatedGPUs(), run.WithFleetPoll(h.Poll),
	}, h.Options...)
	return e
}

// run runs the dispatch with further options, within the harness's
// timeout.
func (e *e2e) run(t *testing.T, ctx context.Context, opts ...run.FleetOption) (*run.FleetResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*e.h.Timeout)
	defer cancel()
	return run.Fleet(ctx, e.p, e.spec, append(e.opts, opts...)...)
}

// collect runs run.CollectFleet on the dispatch's run directory.
func (e *e2e) collect(t *testing.T) *run.FleetResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*e.h.Timeout)
	defer cancel()
	res, err := run.CollectFleet(ctx, e.dir, e.h.Options...)
	if err != nil {
		t.Fatalf("collecting: %v", err)
	}
	return res
}

// detach submits the dispatch detached and returns the record.
func (e *e2e) detach(t *testing.T) *coordinate.State {
	t.Helper()
	res, err := e.run(t, t.Context(), run.Detached())
	if err != nil {
		t.Fatalf("run.Fleet detached: %v", err)
	}
	if res.Collected != nil || res.State == nil || res.State.Done || len(res.State.Jobs) != 2 {
		t.Fatalf("run.Fleet detached: collected %v, record %+v; want 2 jobs submitted, nothing collected", res.Collected, res.State)
	}
	return res.State
}

// OwnerSigner is a release owner's signer with a fresh P-256 key, for
// the fleet's tests that sign a dispatch.
func OwnerSigner(t testing.TB) *sign.Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runEndToEnd runs the end-to-end cases, each as a subtest.
func runEndToEnd(t *testing.T, h Harness) {
	if h.Fleet == nil {
		t.Run("EndToEnd", func(t *testing.T) { t.Skip("the harness gives no fleet file (Harness.Fleet): no end-to-end case ran") })
		return
	}
	t.Run("EndToEnd", func(t *testing.T) { endToEnd(t, h) })
	t.Run("FailingNode", func(t *testing.T) { failingNode(t, h) })
	t.Run("DetachAndCollect", func(t *testing.T) { detachAndCollect(t, h) })
	t.Run("MissingBundle", func(t *testing.T) { missingBundle(t, h) })
	t.Run("Interrupt", func(t *testing.T) { interrupt(t, h) })
	t.Run("Timeout", func(t *testing.T) { timeout(t, h) })
	t.Run("Preemption", func(t *testing.T) { preemption(t, h) })
}

// jobs maps the report's rows by job name.
func jobs(r *dispatch.Report) map[string]dispatch.JobResult {
	out := map[string]dispatch.JobResult{}
	for _, j := range r.Jobs {
		out[j.Job] = j
	}
	return out
}

// passed checks that the dispatch collected in res verified, every job
// passed on a node, and the record is done.
func passed(t *testing.T, res *run.FleetResult) {
	t.Helper()
	if res.Collected == nil || res.State == nil {
		t.Fatalf("nothing collected: %+v", res)
	}
	r := res.Collected.Report
	if !r.Verified || len(r.Jobs) != 2 || len(res.Collected.Missing) != 0 || !res.State.Done {
		t.Errorf("collected: verified %v, %d jobs, missing %v, done %v; problems %v", r.Verified, len(r.Jobs), res.Collected.Missing, res.State.Done, r.Problems)
	}
	for _, j := range r.Jobs {
		if j.Verdict != dispatch.VerdictPassed || j.Node == "" || !j.Simulated {
			t.Errorf("job %+v: want passed on a node, simulated", j)
		}
	}
	for _, j := range []string{jobA100, jobH100} {
		if _, err := os.Stat(filepath.Join(res.Dir, coordinate.NodesDir, j+".intoto.jsonl")); err != nil {
			t.Errorf("job %s's node bundle: %v", j, err)
		}
	}
}

// endToEnd: both classes run the GPU step on a node of theirs, every
// node bundle comes back and verifies, and each target is covered.
func endToEnd(t *testing.T, h Harness) {
	e := newE2E(t, h, "", "")
	res, err := e.run(t, t.Context())
	if err != nil {
		t.Fatalf("run.Fleet: %v", err)
	}
	passed(t, res)
	for _, j := range res.State.Jobs {
		if j.Status.State != fleet.Completed || j.Status.Node == "" || j.ID == "" {
			t.Errorf("record of job %s: %+v, want %s on a node", j.Name, j.Status, fleet.Completed)
		}
	}
	if cov := res.Collected.Report.Coverage; len(cov) != 2 {
		t.Errorf("coverage %+v: want sm_80 and sm_90 each covered", cov)
	}
}

// failingNode: the GPU step asks more memory than a simulated A100 has,
// so the a100 node fails its preflight and signs a bundle that says so;
// the h100 node passes; the release fails naming the a100 job.
func failingNode(t *testing.T, h Harness) {
	e := newE2E(t, h, "", "    memory: 60GiB\n")
	res, err := e.run(t, t.Context())
	if err != nil {
		t.Fatalf("run.Fleet: %v", err)
	}
	r := res.Collected.Report
	got := jobs(r)
	if r.Verified || got[jobA100].Verdict != dispatch.VerdictFailed || !strings.Contains(got[jobA100].Detail, "step check") || got[jobH100].Verdict != dispatch.VerdictPassed {
		t.Errorf("a release with the a100 node failing its step: verified %v, jobs %+v; want a100-0 failed in step check, h100-0 passed", r.Verified, r.Jobs)
	}
	if len(res.Collected.Missing) != 0 {
		t.Errorf("missing %v: a failed node still signs its bundle", res.Collected.Missing)
	}
}

// detachAndCollect: a detached run returns once the jobs are submitted;
// run.CollectFleet, given the run directory alone, waits and collects.
func detachAndCollect(t *testing.T, h Harness) {
	e := newE2E(t, h, "", "")
	e.detach(t)
	passed(t, e.collect(t))
}

// missingBundle: a job killed while it runs leaves no bundle; collect
// reports it missing with the scheduler's state, and the release fails.
func missingBundle(t *testing.T, h Harness) {
	k, ok := h.Jobs.(Killer)
	if !ok {
		t.Skip("the harness cannot kill a job (Harness.Jobs is no fleettest.Killer)")
	}
	e := newE2E(t, h, "sleep 5", "")
	st := e.detach(t)
	waitRunning(t, h, st, jobA100)
	k.Kill(t, st, jobA100)
	res := e.collect(t)
	r := res.Collected.Report
	got := jobs(r)
	if r.Verified || got[jobA100].Verdict != dispatch.VerdictMissing || got[jobH100].Verdict != dispatch.VerdictPassed {
		t.Errorf("a release with a100-0 killed: verified %v, jobs %+v; want a100-0 missing, h100-0 passed", r.Verified, r.Jobs)
	}
	want := "job " + jobA100 + " (" + e.spec.Engine + " "
	if len(res.Collected.Missing) != 1 || !strings.HasPrefix(res.Collected.Missing[0], want) || !strings.Contains(res.Collected.Missing[0], "no node bundle; ") {
		t.Errorf("missing %q: want one line for a100-0 starting %q with the scheduler's state", res.Collected.Missing, want)
	}
}

// waitRunning waits until job of st runs.
func waitRunning(t *testing.T, h Harness, st *coordinate.State, job string) {
	t.Helper()
	id := Job(t, st, job).ID
	s := fleet.Throttle(h.Scheduler, h.Poll)
	ctx, cancel := context.WithTimeout(t.Context(), h.Timeout)
	defer cancel()
	for ctx.Err() == nil {
		got, err := s.Status(ctx, []string{id})
		if err == nil && got[id].State == fleet.Running {
			return
		}
		if err == nil && got[id].State.Final() {
			t.Fatalf("job %s ended before it was seen running: %+v", job, got[id])
		}
	}
	t.Fatalf("job %s not running after %v", job, h.Timeout)
}

// Job is the job named in the coordinator's record st, for a harness's
// Killer and Preempter.
func Job(t *testing.T, st *coordinate.State, job string) coordinate.JobState {
	t.Helper()
	for _, j := range st.Jobs {
		if j.Name == job {
			return j
		}
	}
	t.Fatalf("no job %s in the record", job)
	return coordinate.JobState{}
}

// stopped checks what a dispatch stopped while its jobs ran leaves: the
// record not done and nothing collected, every job ended with the
// scheduler, and no job key left where the dispatch was staged.
func stopped(t *testing.T, h Harness, res *run.FleetResult) {
	t.Helper()
	if res == nil || res.State == nil {
		t.Fatalf("no record of the dispatch stopped: %+v", res)
	}
	if res.State.Done || res.Collected != nil {
		t.Errorf("a stopped dispatch: done %v, collected %v; want neither", res.State.Done, res.Collected)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, coordinate.NodesDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after the dispatch stopped (%v): nothing was collected", coordinate.NodesDir, err)
	}
	for id, s := range wait(t, h, fleet.Throttle(h.Scheduler, h.Poll), res.State.IDs()) {
		if s.State != fleet.Cancelled && s.State != fleet.Gone {
			t.Errorf("job %s after the dispatch stopped: %+v, want %s or %s", id, s, fleet.Cancelled, fleet.Gone)
		}
	}
	for _, j := range res.State.Jobs {
		if _, err := os.Stat(coordinate.KeyPath(res.State.Dispatch, j.Name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("job %s's key left where it was staged after the jobs were cancelled (%v)", j.Name, err)
		}
	}
}

// interrupt: cancelling run.Fleet's context while the jobs run cancels
// them with the scheduler and returns context.Canceled, uncollected.
func interrupt(t *testing.T, h Harness) {
	e := newE2E(t, h, "sleep 120", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var once sync.Once
	res, err := e.run(t, ctx, run.WithFleetProgress(func(ev run.FleetEvent) {
		if ev.State == nil || ev.Submitted {
			return
		}
		for _, j := range ev.State.Jobs {
			if j.Status.State != fleet.Running {
				return
			}
		}
		once.Do(cancel)
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run.Fleet cancelled while its jobs ran: %v, want %v", err, context.Canceled)
	}
	stopped(t, h, res)
}

// timeout: past WithFleetTimeout the jobs are cancelled and run.Fleet
// returns coordinate.ErrTimeout, uncollected.
func timeout(t *testing.T, h Harness) {
	e := newE2E(t, h, "sleep 120", "")
	res, err := e.run(t, t.Context(), run.WithFleetTimeout(3*time.Second))
	if !errors.Is(err, coordinate.ErrTimeout) {
		t.Fatalf("run.Fleet with a 3s timeout: %v, want %v", err, coordinate.ErrTimeout)
	}
	stopped(t, h, res)
}

// preemption: a job stopped while it runs its GPU step and run again
// passes, and the record counts its restart; where the nodes resume a
// run (NodesResume), the job's bundle counts two attempts.
func preemption(t *testing.T, h Harness) {
	p, ok := h.Jobs.(Preempter)
	if !ok {
		t.Skip("the harness cannot preempt a job (Harness.Jobs is no fleettest.Preempter)")
	}
	e := newE2E(t, h, "sleep 5", "")
	preempted := false
	// Progress is called from run.Fleet, on this goroutine: the
	// preemption may fail the test.
	res, err := e.run(t, t.Context(), run.WithFleetProgress(func(ev run.FleetEvent) {
		if ev.State == nil || ev.Submitted || preempted {
			return
		}
		// The step a job runs is known where its node writes it to the
		// shared directory.
		if j := Job(t, ev.State, jobH100); j.Status.State == fleet.Running && (!h.NodesResume || j.Step == "check") {
			preempted = true
			p.Preempt(t, ev.State, jobH100)
		}
	}))
	if err != nil {
		t.Fatalf("run.Fleet: %v", err)
	}
	if !preempted {
		t.Fatalf("job %s was never seen running its step: nothing preempted", jobH100)
	}
	passed(t, res)
	if j := Job(t, res.State, jobH100); j.Status.Restarts < 1 {
		t.Errorf("job %s after a preemption: %+v, want its restart counted", jobH100, j.Status)
	}
	if !h.NodesResume {
		return
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, coordinate.NodesDir, jobH100+".intoto.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	st2, err := sign.UnverifiedStatement(bytes.TrimSpace(b))
	if err != nil {
		t.Fatal(err)
	}
	var node dispatch.Node
	if err := json.Unmarshal(st2.Predicate, &node); err != nil {
		t.Fatal(err)
	}
	if node.Attempts != 2 {
		t.Errorf("%s's bundle counts %d attempts; want 2: the run resumed after the preemption", jobH100, node.Attempts)
	}
	// The step stopped midway ran again whole: its 5 s sleep in the
	// attempt that finished.
	if len(node.Steps) != 1 || node.Steps[0].ID != "check" || node.Steps[0].State != "passed" || node.Steps[0].DurationMS < 5000 {
		t.Errorf("%s's steps %+v: want check passed after at least 5 s in the attempt that finished", jobH100, node.Steps)
	}
}
