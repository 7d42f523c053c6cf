package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/hardware"
)

// Predicate types.
const (
	// PredicateType is the dispatch statement's predicate type.
	PredicateType = "https://gpuattest.dev/fleet-dispatch/v1"
	// NodePredicateType is a node statement's predicate type.
	NodePredicateType = "https://gpuattest.dev/fleet-node/v1"
)

// Results of a node.
const (
	ResultPassed = "passed"
	ResultFailed = "failed"
)

// Sandboxes a node statement names (Node.Sandbox).
const (
	// SandboxBwrap: the host-runner steps ran under bubblewrap, the
	// shared directory (the job keys) hidden.
	SandboxBwrap = "bwrap"
	// SandboxNone: they ran as the job's user with no sandbox (the
	// fleet's hostSteps: unsandboxed); a step could have read a job key.
	SandboxNone = "none"
)

// How the owner's dispatch lets the nodes run host-runner steps
// (Dispatch.HostStepsMode).
const (
	// HostStepsSandboxed: a Slurm node runs them under bubblewrap, the
	// shared directory hidden (the default).
	HostStepsSandboxed = "sandboxed"
	// HostStepsUnsandboxed: the fleet file's hostSteps: unsandboxed; a
	// Slurm node runs them as the job's user with no sandbox.
	HostStepsUnsandboxed = "unsandboxed"
	// HostStepsPod: Kubernetes; they run in the pod's node container,
	// which holds no key.
	HostStepsPod = "pod"
)

// Dispatch is the dispatch statement's predicate.
type Dispatch struct {
	// ID names the dispatch (its directory on the shared filesystem).
	ID string `json:"id"`
	// CreatedAt is when the owner signed it.
	CreatedAt time.Time `json:"createdAt"`
	// Pipeline is the pipeline every node runs the GPU steps of.
	Pipeline Ref `json:"pipeline"`
	// Source is the commit the build came from, when known.
	Source *Source `json:"source,omitempty"`
	// Targets are the pipeline's pinned targets: each must be covered by
	// a job that passed on a GPU of its compute capability.
	Targets []string `json:"targets"`
	// Fleet is the fleet file and engine.
	Fleet Fleet `json:"fleet"`
	// JobScript is the sha256 digest of the job script every job runs,
	// on Kubernetes (the node container's command). On a shared
	// directory it is empty: the job script pins the dispatch file's
	// digest, which the dispatch cannot carry in turn, and the
	// coordinator's record (fleet.json) holds the script's.
	JobScript string `json:"jobScript,omitempty"`
	// Staged are the files staged for the nodes, each checked by the node
	// before it runs anything: the work tree, the build outputs and the
	// pipeline. Paths are relative to the staged work tree.
	Staged []File `json:"staged"`
	// Jobs are every job of the dispatch, one per node.
	Jobs []Job `json:"jobs"`
}

// Ref names a file by digest.
type Ref struct {
	Name   string `json:"name,omitempty"`
	Path   string `json:"path,omitempty"`
	Digest string `json:"digest"`
}

// Source is the source commit.
type Source struct {
	Repository string `json:"repository,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Dirty      bool   `json:"dirty,omitempty"`
}

// Fleet is what the fleet file named.
type Fleet struct {
	Digest    string `json:"digest"`
	Engine    string `json:"engine"`
	Partition string `json:"partition,omitempty"`
	// HostSteps is the fleet file's hostSteps: "unsandboxed" when the
	// owner let the Slurm nodes run host-runner steps with no sandbox;
	// empty (sandboxed) otherwise.
	HostSteps string `json:"hostSteps,omitempty"`
	// Server (without credentials) and Namespace name the Kubernetes
	// cluster and namespace the jobs go to; Registry the OCI repository
	// the dispatch is staged through. Provenance only: verify does not
	// depend on the engine.
	Server    string `json:"server,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Registry  string `json:"registry,omitempty"`
}

// File is a staged file.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Mode is the file's permission bits (0755 for executables).
	Mode uint32 `json:"mode"`
}

// Job is one job of the dispatch: one node of one class.
type Job struct {
	// Name is CLASS-INDEX, unique in the dispatch.
	Name  string `json:"name"`
	Class string `json:"class"`
	Index int    `json:"index"`
	// Gres is the class's GPU request (gpu:h100:8); Constraint its node
	// feature expression.
	Gres       string `json:"gres"`
	Constraint string `json:"constraint,omitempty"`
	// Product is the class's nvidia.com/gpu.product node label
	// (Kubernetes).
	Product string `json:"product,omitempty"`
	// Distinct says the class's jobs run on distinct nodes.
	Distinct bool `json:"distinct,omitempty"`
	// Targets are the pinned targets the job covers.
	Targets []string `json:"targets"`
	// GPUModel is the text every GPU name of the node must contain
	// (case-insensitively); ComputeCapability, when set, the compute
	// capability every GPU must have.
	GPUModel          string `json:"gpuModel"`
	ComputeCapability string `json:"computeCapability,omitempty"`
	// GPUs is how many GPUs the job is given.
	GPUs int `json:"gpus"`
	// Arch is the class's node architecture as Go spells it (amd64,
	// arm64): the gpuattest staged for the job is built for it, and its
	// node statement must say it ran there. Empty in dispatches of an
	// older gpuattest, which checked none.
	Arch string `json:"arch,omitempty"`
	// Nonce is fresh for the job; its node statement must carry it.
	Nonce string `json:"nonce"`
	// PublicKey is the PEM public key of the job's key: the only key
	// whose node statement counts for the job.
	PublicKey string `json:"publicKey"`
}

// Node is a node statement's predicate.
type Node struct {
	// Dispatch is the digest of the dispatch statement (Digest).
	Dispatch string `json:"dispatch"`
	// Job and Nonce are the job's name and nonce from the dispatch.
	Job   string `json:"job"`
	Nonce string `json:"nonce"`
	// Engine, JobID and NodeName are the scheduler, its job ID and the
	// node the job ran on.
	Engine   string `json:"engine"`
	JobID    string `json:"jobId"`
	NodeName string `json:"nodeName"`
	// Arch is the architecture the node's gpuattest was built for
	// (runtime.GOARCH: amd64, arm64), which is the node's; empty from
	// nodes of an older gpuattest.
	Arch string `json:"arch,omitempty"`
	// Result is passed or failed; Reason says why it failed.
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
	// Simulated is true when the GPUs were simulated.
	Simulated bool `json:"simulated"`
	// Hardware is the node's hardware record; nil when none was taken.
	Hardware *hardware.Record `json:"hardware,omitempty"`
	// GPUEvidence is what each GPU of the node signed over
	// gpuevidence.FleetNonce of the dispatch, the job and its UUID, or
	// why it signed nothing; nil from nodes that collected none.
	GPUEvidence *attest.GPUEvidence `json:"gpuEvidence,omitempty"`
	// Sandbox says how the node ran its steps on the host runner:
	// SandboxBwrap or SandboxNone; empty when it ran none there, and on
	// Kubernetes, where they run in the node container, which holds no
	// key (older Kubernetes nodes said SandboxNone). Verify checks it
	// against the dispatch's HostStepsMode.
	Sandbox string `json:"sandbox,omitempty"`
	// Steps are the GPU steps the node ran.
	Steps []Step `json:"steps"`
	// Attempts is how many times the node started the run (more than one
	// after a requeue).
	Attempts int `json:"attempts"`
	// StartedAt and FinishedAt bound the node's run.
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

// Step is one step's outcome on a node.
type Step struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	State      string `json:"state"`
	Reason     string `json:"reason,omitempty"`
	DurationMS int64  `json:"durationMs"`
	// Results are the result files the step wrote (results JSON, JUnit),
	// by path relative to its work dir and sha256.
	Results []Result `json:"results,omitempty"`
	// Telemetry is the step's GPU telemetry summary, as the run recorded
	// it.
	Telemetry json.RawMessage `json:"telemetry,omitempty"`
}

// Result is a result file a step wrote.
type Result struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Statement returns the dispatch statement over subjects.
func (d *Dispatch) Statement(subjects []attest.Subject) (*attest.Statement, error) {
	return statement(subjects, PredicateType, d)
}

// Statement returns the node statement over subjects (the dispatch's).
func (n *Node) Statement(subjects []attest.Subject) (*attest.Statement, error) {
	return statement(subjects, NodePredicateType, n)
}

func statement(subjects []attest.Subject, typ string, pred any) (*attest.Statement, error) {
	b, err := json.Marshal(pred)
	if err != nil {
		return nil, fmt.Errorf("encoding %s predicate: %w", typ, err)
	}
	st := &attest.Statement{Type: attest.StatementType, Subject: subjects, PredicateType: typ, Predicate: b}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return st, nil
}

// Digest is "sha256:<hex>" of the statement's signed bytes: what a node
// statement names as its dispatch.
func Digest(st *attest.Statement) (string, error) {
	b, err := st.Marshal()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// HostStepsMode is how the dispatch lets its nodes run host-runner
// steps: HostStepsPod when it was staged through a registry (the nodes
// are pods), HostStepsUnsandboxed when the owner signed hostSteps:
// unsandboxed, HostStepsSandboxed otherwise.
func (d *Dispatch) HostStepsMode() string {
	switch {
	case d.Fleet.Registry != "":
		return HostStepsPod
	case d.Fleet.HostSteps == HostStepsUnsandboxed:
		return HostStepsUnsandboxed
	}
	return HostStepsSandboxed
}

// Job returns the job named name, or nil.
func (d *Dispatch) Job(name string) *Job {
	for i := range d.Jobs {
		if d.Jobs[i].Name == name {
			return &d.Jobs[i]
		}
	}
	return nil
}

// Decode reads a dispatch predicate strictly (readPredicate).
func Decode(st *attest.Statement) (*Dispatch, error) {
	if st.PredicateType != PredicateType {
		return nil, fmt.Errorf("predicate type %q: expected %s", st.PredicateType, PredicateType)
	}
	var d Dispatch
	if err := readPredicate("dispatch predicate", st.Predicate, &d); err != nil {
		return nil, fmt.Errorf("decoding the dispatch: %w", err)
	}
	return &d, nil
}

// DecodeNode reads a node predicate strictly (readPredicate).
func DecodeNode(st *attest.Statement) (*Node, error) {
	if st.PredicateType != NodePredicateType {
		return nil, fmt.Errorf("predicate type %q: expected %s", st.PredicateType, NodePredicateType)
	}
	var n Node
	if err := readPredicate("node predicate", st.Predicate, &n); err != nil {
		return nil, fmt.Errorf("decoding the node statement: %w", err)
	}
	return &n, nil
}

// NodeEvidence decodes a run record's GPU evidence (engine.Record's
// gpu_evidence) for a node statement; nil when there is none or it does
// not decode (verify then finds none).
func NodeEvidence(raw json.RawMessage) *attest.GPUEvidence {
	if len(raw) == 0 {
		return nil
	}
	var g attest.GPUEvidence
	if json.Unmarshal(raw, &g) != nil {
		return nil
	}
	return &g
}
