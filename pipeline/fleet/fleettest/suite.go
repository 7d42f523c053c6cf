// Package fleettest is the conformance suite of fleet engines, and the
// test helpers their tests share. Run drives an engine through the
// fleet's interfaces alone, on a cluster its harness started: the
// scheduler (fleet.Scheduler: two classes submitted and run to the end
// with their handles in index order, a failing job reported with its
// exit code, a cancelled job ending, unknown jobs reported gone,
// Describe naming the engine), then whole dispatches through the facade
// (run.Fleet, run.CollectFleet): two classes end to end, a failing
// node, detach and collect, a missing bundle, interrupt, timeout and
// preemption. A case the harness's cluster cannot stage (Killer,
// Preempter) is skipped, saying why.
//
// Slurm runs it against internal/slurmtest, Kubernetes against
// internal/k8stest (with Kubelet playing the nodes), and a toy
// in-process engine in this package's tests passes it with no cluster.
package fleettest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// Harness is what the suite needs of an engine under test.
type Harness struct {
	// Scheduler is the engine's scheduler, reaching the harness's
	// cluster. The suite spaces its Status calls with fleet.Throttle.
	Scheduler fleet.Scheduler
	// Request returns a request of count jobs of class whose job ends
	// with exit status exit after about d, on nodes the cluster has.
	Request func(t *testing.T, class string, count, exit int, d time.Duration) fleet.Request
	// Poll spaces Status calls (200ms when 0).
	Poll time.Duration
	// Timeout bounds each wait for jobs to end (60s when 0).
	Timeout time.Duration
	// Unknown is a job ID of the scheduler's form that it never gave
	// out.
	Unknown string

	// Fleet returns the fleet file of the end-to-end cases, on the
	// harness's cluster, for the engine under test: two classes, a100
	// (gres gpu:a100:1, targets [sm_80]) and h100 (gres gpu:h100:1,
	// targets [sm_90]), one node each. Nil skips those cases, saying so.
	Fleet func(t *testing.T) *fleet.Spec
	// Options reach the cluster and its registry in the end-to-end cases
	// (run.WithFleetAccess, run.WithFleetRegistry).
	Options []run.FleetOption
	// NodesResume says that a job run again finds its node's run as it
	// was left (a shared directory): the preempted job's bundle then
	// counts two attempts.
	NodesResume bool
	// Jobs acts on a running job as the cluster can: a Killer, a
	// Preempter, both or nil. The cases that need one it is not are
	// skipped, saying so.
	Jobs any
}

// Run runs every case of the suite against h, each as a subtest: the
// scheduler's, then the end-to-end ones.
func Run(t *testing.T, h Harness) {
	if h.Poll == 0 {
		h.Poll = 200 * time.Millisecond
	}
	if h.Timeout == 0 {
		h.Timeout = 60 * time.Second
	}
	s := fleet.Throttle(h.Scheduler, h.Poll)
	t.Run("Describe", func(t *testing.T) {
		c, err := s.Describe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if c.Engine != s.Name() || c.Name == "" {
			t.Errorf("Describe = %+v, want engine %s and a cluster name", c, s.Name())
		}
	})
	t.Run("TwoClasses", func(t *testing.T) { twoClasses(t, h, s) })
	t.Run("FailingJob", func(t *testing.T) { failingJob(t, h, s) })
	t.Run("Cancel", func(t *testing.T) { cancelJob(t, h, s) })
	t.Run("UnknownIsGone", func(t *testing.T) {
		st, err := s.Status(t.Context(), []string{h.Unknown})
		if err != nil {
			t.Fatal(err)
		}
		if got := st[h.Unknown]; got.State != fleet.Gone {
			t.Errorf("an unknown job: %+v, want %s", got, fleet.Gone)
		}
		if err := s.Cancel(t.Context(), []string{h.Unknown}); err != nil {
			t.Errorf("cancelling an unknown job: %v", err)
		}
	})
	runEndToEnd(t, h)
}

// SleepScript writes dir/NAME.sh, a job script that sleeps d and exits
// with status exit, and returns its path: what a harness's Request runs
// on a cluster whose nodes share dir.
func SleepScript(t *testing.T, dir, name string, exit int, d time.Duration) string {
	t.Helper()
	p := filepath.Join(dir, name+".sh")
	body := fmt.Sprintf("#!/bin/sh\nsleep %d\nexit %d\n", int(d.Seconds()), exit)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func submit(t *testing.T, s fleet.Scheduler, req fleet.Request) []fleet.Handle {
	t.Helper()
	hs, err := s.Submit(t.Context(), req)
	if err != nil {
		t.Fatalf("submitting class %s: %v", req.Class, err)
	}
	if len(hs) != req.Count {
		t.Fatalf("class %s: %d handles for %d jobs", req.Class, len(hs), req.Count)
	}
	for i, h := range hs {
		if h.Index != i || h.Class != req.Class || h.ID == "" {
			t.Errorf("class %s: handle %d is %+v, want index %d of the class with an ID", req.Class, i, h, i)
		}
	}
	return hs
}

// wait polls until every job in ids is final and returns their states.
func wait(t *testing.T, h Harness, s fleet.Scheduler, ids []string) map[string]fleet.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), h.Timeout)
	defer cancel()
	var last map[string]fleet.Status
	for ctx.Err() == nil {
		st, err := s.Status(ctx, ids)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.Fatal(err)
		}
		last = st
		done := true
		for _, id := range ids {
			done = done && st[id].State.Final()
		}
		if done {
			return st
		}
	}
	t.Fatalf("jobs not ended after %v; last states: %+v", h.Timeout, last)
	return nil
}

func ids(hs []fleet.Handle) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

// twoClasses submits two classes, one of two jobs, and runs them to
// the end: every job completed, on a node, with exit status 0.
func twoClasses(t *testing.T, h Harness, s fleet.Scheduler) {
	a := submit(t, s, h.Request(t, "a", 2, 0, 0))
	b := submit(t, s, h.Request(t, "b", 1, 0, 0))
	all := append(ids(a), ids(b)...)
	seen := map[string]bool{}
	for _, id := range all {
		if seen[id] {
			t.Fatalf("job ID %s given twice: %v", id, all)
		}
		seen[id] = true
	}
	st := wait(t, h, s, all)
	for _, id := range all {
		if got := st[id]; got.State != fleet.Completed || got.ExitCode != 0 || got.Node == "" {
			t.Errorf("job %s: %+v, want %s with exit status 0 on a node", id, got, fleet.Completed)
		}
	}
}

// failingJob: a job that exits 3 is reported failed with its status.
func failingJob(t *testing.T, h Harness, s fleet.Scheduler) {
	hs := submit(t, s, h.Request(t, "fail", 1, 3, 0))
	got := wait(t, h, s, ids(hs))[hs[0].ID]
	if got.State != fleet.Failed || got.ExitCode != 3 {
		t.Errorf("a job exiting 3: %+v, want %s with exit status 3", got, fleet.Failed)
	}
}

// cancelJob: a cancelled running or pending job ends, and cancelling it
// again is no error.
func cancelJob(t *testing.T, h Harness, s fleet.Scheduler) {
	hs := submit(t, s, h.Request(t, "cancel", 1, 0, 10*time.Minute))
	if err := s.Cancel(t.Context(), ids(hs)); err != nil {
		t.Fatal(err)
	}
	got := wait(t, h, s, ids(hs))[hs[0].ID]
	if got.State != fleet.Cancelled && got.State != fleet.Gone {
		t.Errorf("a cancelled job: %+v, want %s or %s", got, fleet.Cancelled, fleet.Gone)
	}
	if err := s.Cancel(t.Context(), ids(hs)); err != nil {
		t.Errorf("cancelling it again: %v", err)
	}
}
