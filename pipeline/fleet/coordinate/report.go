package coordinate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
	"github.com/gpuattest/gpuattest/pipeline/report"
)

// BuildDir is the build part's run directory in a fleet run directory
// (RUNDIR/build): the steps without gpu: true, run once on the
// submitting machine.
const BuildDir = "build"

// IsRunDir reports whether dir is the run directory of a fleet run (it
// holds the coordinator's record, StateFile).
func IsRunDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, StateFile))
	return err == nil && fi.Mode().IsRegular()
}

// NodesSimulatedWarning is the banner of a fleet report whose nodes
// simulated their GPUs.
const NodesSimulatedWarning = "nodes: SIMULATED GPUs (run --fleet --simulate-gpus); not real GPUs"

// Report builds the report of the fleet run directory dir: the build's
// (dir/build, which ran on the submitting machine) with a Fleet section
// of one row per job: its class, node, scheduler job ID, GPUs, verdict
// and reason. A collected dispatch's node bundles are checked against
// the dispatch as written (VerifyDir without the owner's key, as collect
// does); one not yet collected shows the scheduler's last known states.
// The report's verdict is the build's and the dispatch's together.
func Report(ctx context.Context, dir string) (*report.Report, error) {
	st, err := LoadState(dir)
	if err != nil {
		return nil, err
	}
	rep, err := report.FromRunDir(filepath.Join(dir, BuildDir))
	if err != nil {
		return nil, fmt.Errorf("reading the build's run directory: %w", err)
	}
	rep.Source = dir
	f := &report.Fleet{Dispatch: filepath.Base(st.Dispatch), DispatchDigest: st.DispatchDigest, Collected: st.Done,
		Cluster: strings.TrimSpace(fmt.Sprintf("%s cluster %s %s", st.Cluster.Engine, st.Cluster.Name, st.Cluster.Version))}
	rep.Fleet = f
	if st.Simulated {
		rep.Warnings = append(rep.Warnings, NodesSimulatedWarning)
	}
	if !st.Done {
		for _, j := range st.Jobs {
			f.Nodes = append(f.Nodes, report.FleetNode{Job: j.Name, Class: j.Class, Node: j.Status.Node, JobID: j.ID,
				Verdict: strings.ToLower(string(j.Status.State)), Reason: j.Status.Reason})
		}
		if rep.Verdict.Passed {
			rep.Verdict = report.Verdict{State: "not collected", Reason: "the dispatch was not collected: its jobs may still run, or were cancelled; gpuattest fleet collect " + dir + " waits for them and collects"}
		}
		return rep, nil
	}
	r, err := verifyDir(ctx, dir, st, nil, dispatch.Options{AllowSimulated: st.Simulated})
	if err != nil {
		return nil, err
	}
	if r.Dispatch != nil {
		f.Dispatch = r.Dispatch.ID
	}
	f.Passed = r.Verified
	for _, p := range r.Problems {
		f.Problems = append(f.Problems, stagefs.FirstLine(p))
	}
	jobs := map[string]JobState{}
	for _, j := range st.Jobs {
		jobs[j.Name] = j
	}
	for _, j := range r.Jobs {
		row := report.FleetNode{Job: j.Job, Class: j.Class, Node: j.Node, JobID: j.JobID, GPU: j.GPU, Verdict: j.Verdict, Reason: stagefs.FirstLine(j.Detail)}
		if js, ok := jobs[j.Job]; ok && j.Verdict == dispatch.VerdictMissing {
			row.Node, row.JobID = js.Status.Node, js.ID
			row.Reason += fmt.Sprintf("; %s says %s", st.Cluster.Engine, js.Status.State)
			if js.Status.Reason != "" {
				row.Reason += " (" + js.Status.Reason + ")"
			}
		}
		f.Nodes = append(f.Nodes, row)
	}
	if !f.Passed {
		if rep.Verdict.Passed {
			rep.Verdict = report.Verdict{State: "failed", Reason: "the fleet dispatch failed"}
		}
		rep.Verdict.Failures = append(rep.Verdict.Failures, f.Problems...)
	}
	return rep, nil
}
