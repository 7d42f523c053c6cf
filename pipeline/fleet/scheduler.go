package fleet

import (
	"context"
	"time"
)

// Scheduler runs a dispatch's jobs on a cluster's own scheduler: Slurm
// (pipeline/fleet/slurm) and Kubernetes Indexed Jobs (pipeline/fleet/kube,
// one Job per class, one completion index per node). A Request covers
// every node of one class, and Submit returns one Handle per node,
// addressed by its index. How often Status asks the scheduler is not a
// Scheduler's concern: Throttle bounds it for any of them.
type Scheduler interface {
	// Name is the engine's name as fleet.yaml spells it: "slurm" or
	// "kubernetes".
	Name() string
	// Submit submits the jobs of one class, one per node (req.Count of
	// them), and returns their handles in index order. On an error no
	// job of req is left queued.
	Submit(ctx context.Context, req Request) ([]Handle, error)
	// Status returns the state of each job named, by Handle.ID. A job
	// the scheduler no longer knows is returned with State Gone.
	Status(ctx context.Context, ids []string) (map[string]Status, error)
	// Cancel cancels the jobs named; cancelling a finished or unknown job
	// is not an error.
	Cancel(ctx context.Context, ids []string) error
	// Describe says which cluster the engine talks to, for provenance.
	Describe(ctx context.Context) (Cluster, error)
}

// Selectors pick the nodes a class runs on: what every engine selects
// by, and the engine's own selection (Placement).
type Selectors struct {
	// GPUType is the GPU model the scheduler knows (Slurm's gres type:
	// a100, h100).
	GPUType string `json:"gpuType"`
	// GPUs is how many GPUs of GPUType each job takes.
	GPUs int `json:"gpus"`
	// Distinct asks that no two jobs of the class share a node.
	Distinct bool `json:"distinct,omitempty"`
	// Arch is the nodes' architecture as Go spells it (amd64, arm64)
	// when the class names one; empty: wherever the scheduler places
	// the jobs.
	Arch string `json:"arch,omitempty"`
	// Placement is the engine's own node selection for the class, from
	// the class's fields that engine reads (Slurm: the feature
	// constraint; Kubernetes: the product and node labels): its
	// EngineConfig.Validate sets it, and only its Scheduler reads it.
	Placement any `json:"-"`
}

// Request is the jobs of one class: the same Job on Count nodes, each
// told its index.
type Request struct {
	// Name names the jobs in the scheduler (Slurm's --job-name).
	Name string
	// Class is the fleet class the jobs belong to.
	Class string
	// Selectors pick the nodes.
	Selectors Selectors
	// Count is how many jobs (nodes): at least 1.
	Count int
	// Job is what each job runs, as the dispatch's staging describes
	// it: a ScriptJob on a shared directory (SharedStaging), an
	// ImageJob through a registry (RegistryStaging). An engine takes
	// the kind its settings stage and refuses others.
	Job Job
	// Env is added to each job's environment.
	Env map[string]string
	// TimeLimit bounds each job's run time (Slurm's --time).
	TimeLimit time.Duration
	// Requeue lets the scheduler run a job again after preemption or a
	// node failure.
	Requeue bool
	// Array submits the Count jobs as one array job where the engine has
	// them (Slurm's --array; a Kubernetes Indexed Job is this shape), one
	// job per node otherwise. Each job still has its own Handle and
	// finds its index in IndexEnv.
	Array bool

	// Dispatch is the dispatch's ID: engines label or name the jobs with
	// it.
	Dispatch string
}

// Job is what each job of a Request runs: ScriptJob or ImageJob, as the
// dispatch's staging made it.
type Job interface{ stagedJob() }

// ScriptJob is a job staged in a directory the nodes and the coordinator
// share (SharedStaging): a script the scheduler runs on the node.
type ScriptJob struct {
	// Script is the job script's path on the shared directory; it runs
	// with Args and finds its index in $GPUATTEST_FLEET_INDEX.
	Script string
	// Args are the script's arguments.
	Args []string
	// LogDir is a shared directory for the jobs' stdout and stderr; they
	// are discarded when it is empty.
	LogDir string
}

// ImageJob is a job staged through a registry (RegistryStaging): two
// commands in the fleet's image, the node pulling the staged dispatch,
// and keys the engine delivers itself.
type ImageJob struct {
	// Command is what each job runs in the fleet's image: the node side
	// that pulls the staged dispatch, checks it and runs the GPU steps.
	// It is never given the job keys.
	Command []string
	// SignCommand runs beside Command, in a process of its own (a second
	// container of the pod): the only one given the job's key, at
	// KeyMount/<index>.key. It signs and publishes what Command reported
	// in ReportMount.
	SignCommand []string
	// Keys are the jobs' private keys (PEM), by index, which the engine
	// delivers (Kubernetes: one Secret per class).
	Keys [][]byte
}

func (ScriptJob) stagedJob() {}
func (ImageJob) stagedJob()  {}

// Paths in a job's container on engines that run an ImageJob.
const (
	// KeyMount is the directory of the job keys, <index>.key, mounted
	// read-only into the SignCommand's container alone.
	KeyMount = "/var/run/gpuattest/keys"
	// ReportMount is the directory Command writes its report to and
	// SignCommand reads it from.
	ReportMount = "/var/run/gpuattest/report"
)

// Environment of a job on engines that run images, besides IndexEnv.
const (
	// NodeEnv carries the name of the node the job runs on.
	NodeEnv = "GPUATTEST_FLEET_NODE"
	// JobEnv carries the scheduler's name of the job (the Kubernetes
	// Job); with the index it makes the Handle.ID.
	JobEnv = "GPUATTEST_FLEET_JOB"
)

// Finisher is implemented by engines that hold something for a dispatch
// after its jobs ended (Kubernetes: the Secrets of the job keys, a Job
// left with an unschedulable pod). The coordinator calls Finish once
// every job ended, before it collects.
type Finisher interface {
	Finish(ctx context.Context, ids []string) error
}

// IndexEnv is the variable that carries a job's index within its class.
const IndexEnv = "GPUATTEST_FLEET_INDEX"

// Handle names one submitted job.
type Handle struct {
	// ID is the scheduler's identifier of the job (Slurm's job ID).
	ID string `json:"id"`
	// Class and Index say which job of the dispatch it is.
	Class string `json:"class"`
	Index int    `json:"index"`
	// Object, UID and Manifest name the scheduler object that holds the
	// job, where the engine submits one per class (Kubernetes: the Job's
	// name and UID and the sha256 of the manifest submitted).
	Object   string `json:"object,omitempty"`
	UID      string `json:"uid,omitempty"`
	Manifest string `json:"manifest,omitempty"`
}

// State is a job's state as the fleet sees it.
type State string

// The states. Slurm's own names are kept; Gone means the scheduler no
// longer reports the job.
const (
	Pending    State = "PENDING"
	Running    State = "RUNNING"
	Completing State = "COMPLETING"
	Completed  State = "COMPLETED"
	Failed     State = "FAILED"
	Cancelled  State = "CANCELLED"
	Timeout    State = "TIMEOUT"
	NodeFail   State = "NODE_FAIL"
	Preempted  State = "PREEMPTED"
	OutOfMem   State = "OUT_OF_MEMORY"
	Gone       State = "GONE"
)

// Final reports whether a job in state s will not run again by itself.
// A preempted job with requeue set comes back as PENDING; until then it
// counts as final only if the scheduler says so.
func (s State) Final() bool {
	switch s {
	case Completed, Failed, Cancelled, Timeout, NodeFail, OutOfMem, Gone:
		return true
	}
	return false
}

// Status is one job's state.
type Status struct {
	// ID is the job's Handle.ID.
	ID string `json:"id"`
	// State is where the job is.
	State State `json:"state"`
	// Raw is the scheduler's own state text, when it differs.
	Raw string `json:"raw,omitempty"`
	// Reason is the scheduler's reason for a pending or failed job.
	Reason string `json:"reason,omitempty"`
	// Node is the node the job runs or ran on; empty while pending.
	Node string `json:"node,omitempty"`
	// Start is when the job (last) started; zero while pending.
	Start time.Time `json:"start,omitzero"`
	// End is when it ended; zero while it runs.
	End time.Time `json:"end,omitzero"`
	// Restarts counts requeues.
	Restarts int `json:"restarts,omitempty"`
	// ExitCode is the job script's exit status once it ended.
	ExitCode int `json:"exitCode,omitempty"`
}

// Cluster describes the cluster an engine submits to, for provenance.
type Cluster struct {
	// Engine is the engine's Name.
	Engine string `json:"engine"`
	// Name is the cluster's name (Slurm's ClusterName).
	Name string `json:"name"`
	// Version is the scheduler's version.
	Version string `json:"version,omitempty"`
	// Partition is where jobs go, when the engine has partitions.
	Partition string `json:"partition,omitempty"`
	// Server is the API server's URL, without credentials (Kubernetes).
	Server string `json:"server,omitempty"`
	// Namespace is where the jobs go (Kubernetes).
	Namespace string `json:"namespace,omitempty"`
	// Objects are the scheduler objects submitted, one per class
	// (Kubernetes Jobs), with their UIDs and manifest digests.
	Objects []Object `json:"objects,omitempty"`
}

// Object is a scheduler object the coordinator submitted.
type Object struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Class    string `json:"class"`
	UID      string `json:"uid"`
	Manifest string `json:"manifest"`
}
