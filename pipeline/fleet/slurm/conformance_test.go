package slurm_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/slurmtest"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

func TestMain(m *testing.M) { fleettest.Main(m) }

// suiteFleet is the suite's two classes on the test cluster's one node.
const suiteFleet = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: slurm
partition: %s
sharedDir: %s
classes:
  - {name: a100, gres: "gpu:a100:1", constraint: sm_80, targets: [sm_80], timeLimit: 5m}
  - {name: h100, gres: "gpu:h100:1", constraint: sm_90, targets: [sm_90], timeLimit: 5m}
`

// TestConformance runs the fleet's conformance suite against a local
// Slurm cluster (internal/slurmtest), whose jobs it can kill and
// preempt.
func TestConformance(t *testing.T) {
	c, e, shared := start(t)
	// run.Fleet opens its own scheduler from the fleet file: it reaches
	// the cluster through the environment, as on a login node.
	t.Setenv("SLURM_CONF", c.Conf)
	request := func(t *testing.T, class string, count, exit int, d time.Duration) fleet.Request {
		return fleet.Request{Name: "gpuattest-" + class, Class: class, Count: count, Job: fleet.ScriptJob{Script: fleettest.SleepScript(t, shared, class, exit, d), LogDir: shared},
			Selectors: fleet.Selectors{GPUType: "h100", GPUs: 1}, TimeLimit: 15 * time.Minute}
	}
	fleettest.Run(t, fleettest.Harness{Scheduler: e, Request: request, Unknown: "999999", Timeout: 90 * time.Second, NodesResume: true,
		Jobs: slurmJobs{c},
		Fleet: func(t *testing.T) *fleet.Spec {
			dir := testenv.DirOutside(t, "fleet-shared-", runner.SandboxScratch)
			spec, err := fleet.Parse("fleet.yaml", fmt.Appendf(nil, suiteFleet, c.Partition, dir))
			if err != nil {
				t.Fatal(err)
			}
			return spec
		}})
	if t.Failed() {
		t.Log(c.Logs())
	}
}

// slurmJobs kills and preempts the test cluster's jobs for the suite.
type slurmJobs struct{ c *slurmtest.Cluster }

func (s slurmJobs) scontrol(t *testing.T, name string, args ...string) {
	t.Helper()
	if b, err := s.c.Command(t.Context(), name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, b)
	}
}

// Kill sends the job SIGKILL, as a node's OOM killer or an operator
// would: Slurm marks it CANCELLED and does not run it again.
func (s slurmJobs) Kill(t *testing.T, st *coordinate.State, job string) {
	s.scontrol(t, "scancel", "--signal=KILL", "--full", fleettest.Job(t, st, job).ID)
}

// Preempt kills the job and requeues it, as a preemption with requeue
// does.
func (s slurmJobs) Preempt(t *testing.T, st *coordinate.State, job string) {
	id := fleettest.Job(t, st, job).ID
	s.Kill(t, st, job)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b, _ := s.c.Command(t.Context(), "squeue", "-h", "-j", id, "-o", "%T").Output()
		if state := strings.TrimSpace(string(b)); state != "RUNNING" && state != "COMPLETING" {
			break
		}
	}
	// slurmd refuses to launch a job whose credential is no newer than
	// the job's last kill, compared in whole seconds ("Job N already
	// killed, do not launch batch job"): a requeue in the second of the
	// kill fails at once. Slurm's own requeue waits two minutes; this
	// one waits into the next second.
	time.Sleep(1100 * time.Millisecond)
	s.scontrol(t, "scontrol", "requeue", id)
	// Slurm holds a requeued job for two minutes (BeginTime); the test
	// does not wait them out.
	s.scontrol(t, "scontrol", "update", "JobId="+id, "StartTime=now")
}
