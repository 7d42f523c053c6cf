package slurm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/slurmtest"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/slurm"
)

// start starts a local cluster and an engine for it.
func start(t *testing.T) (*slurmtest.Cluster, *slurm.Engine, string) {
	t.Helper()
	c := slurmtest.Start(t, nil)
	e, err := slurm.New(c.Partition, slurm.WithEnv(c.Env()...))
	if err != nil {
		t.Fatal(err)
	}
	shared := t.TempDir()
	return c, e, shared
}

// script writes a job script to dir that records its index, devices,
// node and FOO in out/<index>, then runs body.
func script(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "job.sh")
	s := "#!/bin/sh\necho \"$GPUATTEST_FLEET_INDEX $CUDA_VISIBLE_DEVICES $SLURMD_NODENAME $FOO\" > \"$1/$GPUATTEST_FLEET_INDEX\"\n" + body + "\n"
	if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls Status every 200 ms until every job satisfies ok, for
// 30 s at most.
func waitFor(t *testing.T, c *slurmtest.Cluster, se *slurm.Engine, ids []string, ok func(fleet.Status) bool) map[string]fleet.Status {
	t.Helper()
	e := fleet.Throttle(se, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var last map[string]fleet.Status
	for ctx.Err() == nil {
		st, err := e.Status(ctx, ids)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.Fatal(err)
		}
		last = st
		all := true
		for _, id := range ids {
			all = all && ok(st[id])
		}
		if all {
			return st
		}
	}
	t.Fatalf("timed out; last states: %+v\n%s", last, c.Logs())
	return nil
}

func TestDescribe(t *testing.T) {
	c, e, _ := start(t)
	got, err := e.Describe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.Engine != "slurm" || got.Name != c.Name || got.Partition != c.Partition || !strings.HasPrefix(got.Version, "2") {
		t.Errorf("Describe = %+v, want engine slurm, cluster %s, partition %s and a version", got, c.Name, c.Partition)
	}
}

// TestSubmitRunsOneJobPerNodeWithItsIndexAndDevice submits a two-job
// class on a node with one device of its type: one job runs with the
// device while the other waits for it, then both complete.
func TestSubmitRunsOneJobPerNodeWithItsIndexAndDevice(t *testing.T) {
	c, e, shared := start(t)
	out := filepath.Join(shared, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	req := fleet.Request{
		Name: "gpuattest-test", Class: "h100", Count: 2,
		Selectors: fleet.Selectors{GPUType: "h100", GPUs: 1, Placement: slurm.Placement{Constraint: "sm_90"}},
		// Long enough for a poll to see one job run while the other
		// waits for the device.
		Job:       fleet.ScriptJob{Script: script(t, shared, "sleep 3"), Args: []string{out}, LogDir: shared},
		Env:       map[string]string{"FOO": "bar"},
		TimeLimit: 90 * time.Second,
		Requeue:   true,
	}
	hs, err := e.Submit(t.Context(), req)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	if len(hs) != 2 || hs[0].Index != 0 || hs[1].Index != 1 || hs[0].Class != "h100" || hs[0].ID == hs[1].ID {
		t.Fatalf("handles = %+v, want two distinct jobs of class h100 with indexes 0 and 1", hs)
	}
	ids := []string{hs[0].ID, hs[1].ID}
	// The node has one h100: while one job runs, the other waits for it.
	st := waitFor(t, c, e, ids, func(s fleet.Status) bool { return s.State == fleet.Running || s.State == fleet.Pending })
	sawWait := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !sawWait; {
		running, pending := 0, 0
		for _, s := range st {
			switch s.State {
			case fleet.Running:
				running++
				if s.Node != c.Node || s.Start.IsZero() {
					t.Errorf("running job %+v: want node %s and a start time", s, c.Node)
				}
			case fleet.Pending:
				if s.Node != "" {
					t.Errorf("pending job %+v: want no node", s)
				}
				if s.Reason == "Resources" {
					pending++
				}
			}
		}
		sawWait = running == 1 && pending == 1
		if st, err = e.Status(t.Context(), ids); err != nil {
			t.Fatal(err)
		}
	}
	if !sawWait {
		t.Errorf("never saw one job running while the other waited (Resources) for the one h100")
	}
	st = waitFor(t, c, e, ids, func(s fleet.Status) bool { return s.State.Final() })
	for _, h := range hs {
		s := st[h.ID]
		if s.State != fleet.Completed || s.ExitCode != 0 || s.Node != c.Node || s.End.IsZero() {
			t.Errorf("job %d: %+v, want COMPLETED on %s with exit code 0 and an end time", h.Index, s, c.Node)
		}
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprint(h.Index)))
		if err != nil {
			t.Fatal(err)
		}
		// gres.conf lists the a100 first, so the h100 is device 1.
		if want := fmt.Sprintf("%d 1 %s bar", h.Index, c.Node); strings.TrimSpace(string(got)) != want {
			t.Errorf("job %d saw %q, want %q", h.Index, got, want)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(shared, "h100-*-*.log"))
	if len(logs) != 2 {
		t.Errorf("job logs %v, want one per job in the log directory", logs)
	}
}

func TestStatusReportsFailureAndExitCode(t *testing.T) {
	c, e, shared := start(t)
	hs, err := e.Submit(t.Context(), fleet.Request{
		Name: "gpuattest-test", Class: "a100", Count: 1,
		Selectors: fleet.Selectors{GPUType: "a100", GPUs: 1, Placement: slurm.Placement{Constraint: "sm_80"}},
		Job:       fleet.ScriptJob{Script: script(t, shared, "exit 3"), Args: []string{shared}}, TimeLimit: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := waitFor(t, c, e, []string{hs[0].ID}, func(s fleet.Status) bool { return s.State.Final() })
	if s := st[hs[0].ID]; s.State != fleet.Failed || s.ExitCode != 3 {
		t.Errorf("status %+v, want FAILED with exit code 3", s)
	}
	// Without a log directory the job's output is discarded, never left
	// in sbatch's working directory (this package's).
	if stray, _ := filepath.Glob("slurm-*.out"); len(stray) != 0 {
		t.Errorf("job output left in the working directory: %v", stray)
	}
	// An unknown job is GONE: the conformance suite checks it.
}

// TestUnsatisfiableClassStaysPending: a class whose constraint no node
// has is refused by sbatch, and no job is left behind.
func TestSubmitRefusesAnUnsatisfiableClass(t *testing.T) {
	c, e, shared := start(t)
	_, err := e.Submit(t.Context(), fleet.Request{
		Name: "gpuattest-test", Class: "b200", Count: 2,
		Selectors: fleet.Selectors{GPUType: "b200", GPUs: 8, Placement: slurm.Placement{Constraint: "sm_100"}},
		Job:       fleet.ScriptJob{Script: script(t, shared, "true"), Args: []string{shared}}, TimeLimit: time.Minute,
	})
	if err == nil || !strings.Contains(err.Error(), "class b200") {
		t.Fatalf("err = %v, want sbatch's refusal naming the class", err)
	}
	out, qerr := c.Command(t.Context(), "squeue", "-h").Output()
	if qerr != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("squeue after a refused submission: %q, %v; want no job", out, qerr)
	}
}

// TestSubmitArray submits a two-job class as one array job on a node
// with one a100: each task gets its own handle and index, one waits while
// the other runs, and both complete.
func TestSubmitArray(t *testing.T) {
	c, e, shared := start(t)
	out := filepath.Join(shared, "it's out") // a quote and a space survive --wrap
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	hs, err := e.Submit(t.Context(), fleet.Request{
		Name: "gpuattest-test", Class: "a100", Count: 2, Array: true,
		Selectors: fleet.Selectors{GPUType: "a100", GPUs: 1, Placement: slurm.Placement{Constraint: "sm_80"}},
		Job:       fleet.ScriptJob{Script: script(t, shared, "sleep 1"), Args: []string{out}, LogDir: shared}, Env: map[string]string{"FOO": "arr"},
		TimeLimit: time.Minute,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
	if len(hs) != 2 || !strings.HasSuffix(hs[0].ID, "_0") || !strings.HasSuffix(hs[1].ID, "_1") {
		t.Fatalf("handles %+v, want JOB_0 and JOB_1", hs)
	}
	ids := []string{hs[0].ID, hs[1].ID}
	// Right after submission both tasks are pending in one squeue record
	// (array_task_string "0-1"), each reported under its own ID.
	st, err := e.Status(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if st[id].State == fleet.Gone {
			t.Errorf("task %s right after submission: %+v, want it listed", id, st[id])
		}
	}
	st = waitFor(t, c, e, ids, func(s fleet.Status) bool { return s.State.Final() })
	for _, h := range hs {
		if s := st[h.ID]; s.State != fleet.Completed || s.Node != c.Node {
			t.Errorf("task %s: %+v, want COMPLETED on %s", h.ID, s, c.Node)
		}
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprint(h.Index)))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d 0 %s arr", h.Index, c.Node); strings.TrimSpace(string(got)) != want {
			t.Errorf("task %d saw %q, want %q", h.Index, got, want)
		}
	}
}
