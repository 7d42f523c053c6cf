package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ad "github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/limits"
)

// Staging through a registry (Kubernetes). The coordinator pushes the
// dispatch directory (the signed dispatch, the job script and every
// staged file; never the keys) as one OCI release, and each job gets its
// reference by digest in ReleaseEnv. The node container pulls it,
// checks every file against the dispatch as a Slurm node does, runs the
// GPU steps and writes its report (ReportFile); the sign container, the
// only one with the job key, signs the report and pushes the node bundle
// back under NodeTag.

// ReleaseEnv carries the staged dispatch's reference by digest.
const ReleaseEnv = "GPUATTEST_FLEET_RELEASE"

// ReportFile is the node's unsigned report in fleet.ReportMount.
const ReportFile = "node.json"

// ErrRegistry is wrapped by SignNode's error when the registry could not
// be read or written: another attempt may pass.
var ErrRegistry = errors.New("the staging registry failed")

// NodeTag is the tag of job's node bundle in the staging repository:
// the dispatch's ID and the job's name, so that neither the referrers
// API nor its tag fallback is needed.
func NodeTag(dispatch, job string) string {
	t := "node-" + dispatch + "-" + job
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// repository is ref without its tag or digest.
func repository(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// pushStaged pushes the dispatch directory dir as a release to repo,
// tagged with the dispatch's ID, and returns its reference by digest.
func pushStaged(ctx context.Context, dir, repo string, d *ad.Dispatch, opts []oci.Option) (string, error) {
	files := make([]oci.File, 0, len(d.Staged)+2)
	add := func(rel, sha string) error {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		files = append(files, oci.File{Name: rel, Path: filepath.Join(dir, filepath.FromSlash(rel)), SHA256: sha, Size: fi.Size()})
		return nil
	}
	for _, f := range d.Staged {
		if err := add(f.Path, f.SHA256); err != nil {
			return "", err
		}
	}
	for _, name := range []string{DispatchFile, JobScript} {
		b, err := limits.ReadFile(filepath.Join(dir, name), 64<<20, name)
		if err != nil {
			return "", err
		}
		if err := add(name, strings.TrimPrefix(digestOf(b), "sha256:")); err != nil {
			return "", err
		}
	}
	rel, err := oci.NewRelease(files)
	if err != nil {
		return "", err
	}
	res, err := oci.Push(ctx, repo+":dispatch-"+d.ID, rel, nil, opts...)
	if err != nil {
		return "", fmt.Errorf("staging the dispatch in %s: %w\nhint: the fleet's kubernetes.registry must be writable from here and readable from the pods", repo, err)
	}
	return res.Ref, nil
}

// Release is what a job on Kubernetes needs besides Node: the staged
// dispatch and the registry.
type Release struct {
	// Ref is the staged dispatch by digest (ReleaseEnv).
	Ref string
	// Class and Index name the job.
	Class string
	Index int
	// Work is a new directory the node pulls the dispatch into and runs
	// in.
	Work string
	// ReportDir is fleet.ReportMount (the node writes, the signer reads).
	ReportDir string
	// KeyDir is fleet.KeyMount (the signer reads <index>.key).
	KeyDir string
	// Options reach the registry.
	Options []oci.Option
}

// ReportNode is the node container's side of a job on Kubernetes: it
// pulls the staged dispatch by digest, runs the job as RunNode does
// (every staged file checked against the dispatch, the GPU steps run,
// never holding the job key) and writes the unsigned predicate to
// ReportDir/ReportFile for SignNode. A node that fails, or cannot pull
// the dispatch, still reports why, and ReportNode returns ErrNodeFailed.
func ReportNode(ctx context.Context, n Node, r Release) (*ad.Node, error) {
	pred, runErr, err := reportNode(ctx, &n, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // stopped: report nothing; the pod ends anyway
		}
		// The node could not start (the registry, a dispatch without the
		// job): it still reports why, and the sign container signs that.
		now := time.Now().UTC()
		pred = &ad.Node{Engine: n.Engine, JobID: n.JobID, NodeName: n.NodeName, Result: ad.ResultFailed, Reason: err.Error(),
			Steps: []ad.Step{}, StartedAt: now, FinishedAt: now}
		runErr = err
	}
	b, err := json.Marshal(pred)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(r.ReportDir, ReportFile), b, 0o644); err != nil {
		return nil, fmt.Errorf("writing the node's report: %w", err)
	}
	if runErr != nil {
		return pred, fmt.Errorf("%w: job %s-%d on %s: %w", ErrNodeFailed, r.Class, r.Index, n.NodeName, runErr)
	}
	return pred, nil
}

// reportNode pulls the staged dispatch and runs the job: the predicate,
// why the node failed, and an error when it could not run at all.
func reportNode(ctx context.Context, n *Node, r Release) (*ad.Node, error, error) {
	if !strings.Contains(r.Ref, "@sha256:") {
		return nil, nil, fmt.Errorf("the staged dispatch %q is not named by digest", r.Ref)
	}
	dir := filepath.Join(r.Work, "dispatch")
	if _, err := oci.PullFiles(ctx, r.Ref, dir, nil, r.Options...); err != nil {
		return nil, nil, fmt.Errorf("pulling the staged dispatch: %w", err)
	}
	n.Dir, n.Job = dir, fmt.Sprintf("%s-%d", r.Class, r.Index)
	l, err := loadDispatch(filepath.Join(dir, DispatchFile), n.Job)
	if err != nil {
		return nil, nil, err
	}
	// The host-runner steps run in this container, which holds no key:
	// the statement names no sandbox of the node's own.
	n.podSandbox = true
	// No step may name the key's path, though this container has none.
	return n.execute(ctx, l, filepath.Join(r.KeyDir, strconv.Itoa(r.Index)+".key"))
}

// reportPoll is how often SignNode looks for the node's report.
const reportPoll = time.Second

// SignNode is the sign container's side of a job on Kubernetes: it
// pulls the dispatch alone by digest, loads the job key of its index
// from KeyDir and checks it is the one the dispatch delegated to the
// job, waits for the node container's report, signs it as the job's
// node statement (the dispatch's digest, the job's name and nonce, and
// the engine, job ID and node name from its own environment, whatever
// the report says) and pushes the bundle to the staging repository
// under NodeTag. It returns ErrNodeFailed when the report says the node
// failed.
func SignNode(ctx context.Context, n Node, r Release) (*ad.Node, error) {
	if !strings.Contains(r.Ref, "@sha256:") {
		return nil, fmt.Errorf("the staged dispatch %q is not named by digest", r.Ref)
	}
	dir := filepath.Join(r.Work, "dispatch")
	if _, err := oci.PullFiles(ctx, r.Ref, dir, []string{DispatchFile}, r.Options...); err != nil {
		return nil, fmt.Errorf("%w: pulling the dispatch: %w", ErrRegistry, err)
	}
	job := fmt.Sprintf("%s-%d", r.Class, r.Index)
	l, err := loadDispatch(filepath.Join(dir, DispatchFile), job)
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(r.KeyDir, strconv.Itoa(r.Index)+".key")
	pemKey, err := loadJobKey(keyPath)
	if err != nil {
		return nil, err
	}
	signer, err := jobSigner(pemKey, keyPath, l.job)
	if err != nil {
		return nil, err
	}
	pred, err := waitReport(ctx, filepath.Join(r.ReportDir, ReportFile))
	if err != nil {
		return nil, err
	}
	pred.Dispatch, pred.Job, pred.Nonce = l.digest, l.job.Name, l.job.Nonce
	pred.Engine, pred.JobID, pred.NodeName = n.Engine, n.JobID, n.NodeName
	// The steps ran in the node container, which holds no key: the node
	// names no sandbox of its own, whatever its report says.
	pred.Sandbox = ""
	if pred.Engine == "" {
		pred.Engine = l.d.Fleet.Engine
	}
	b, err := signNode(ctx, signer, l, pred)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(r.Work, NodeFile)
	if err := sign.WriteJSONL(out, [][]byte{b}); err != nil {
		return nil, err
	}
	if err := pushNode(ctx, out, repository(r.Ref)+":"+NodeTag(l.d.ID, job), r.Options); err != nil {
		return nil, err
	}
	if pred.Result != ad.ResultPassed {
		return pred, fmt.Errorf("%w: job %s on %s: %s", ErrNodeFailed, job, n.NodeName, pred.Reason)
	}
	return pred, nil
}

// waitReport waits for the node's report and reads it.
func waitReport(ctx context.Context, path string) (*ad.Node, error) {
	t := time.NewTicker(reportPoll)
	defer t.Stop()
	for {
		b, err := limits.ReadFile(path, 64<<20, "node report")
		if err == nil {
			var pred ad.Node
			if err := json.Unmarshal(b, &pred); err != nil {
				return nil, fmt.Errorf("reading the node's report %s: %w", path, err)
			}
			return &pred, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the node's report: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// pushNode pushes the node bundle file as a release of one file to ref.
func pushNode(ctx context.Context, file, ref string, opts []oci.Option) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	rel, err := oci.NewRelease([]oci.File{{Name: NodeFile, Path: file, SHA256: strings.TrimPrefix(digestOf(b), "sha256:"), Size: int64(len(b))}})
	if err != nil {
		return err
	}
	if _, err := oci.Push(ctx, ref, rel, nil, opts...); err != nil {
		return fmt.Errorf("%w: pushing the node bundle to %s: %w", ErrRegistry, ref, err)
	}
	return nil
}

// fetchNode fetches job's node bundle from the staging repository, or
// returns an error saying why there is none.
func fetchNode(ctx context.Context, s *State, job string, opts []oci.Option) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "gpuattest-node-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "b")
	id := strings.TrimSuffix(filepath.Base(s.Dispatch), string(filepath.Separator))
	if _, err := oci.PullFiles(ctx, repository(s.Release)+":"+NodeTag(id, job), dir, []string{NodeFile}, opts...); err != nil {
		return nil, err
	}
	return limits.ReadFile(filepath.Join(dir, NodeFile), 64<<20, "node bundle")
}

// kubeCommands are the node and sign containers' commands for class on
// Kubernetes: the job script, run by sh with the class as its argument,
// and gpuattest fleet sign.
func kubeCommands(script, class string) (node, signCmd []string) {
	return []string{"/bin/sh", "-c", script, "job.sh", class}, []string{"gpuattest", "fleet", "sign", class}
}

// kubeScript is the job script of a dispatch on Kubernetes: what the
// node container runs.
func kubeScript(id string) string {
	return fmt.Sprintf("#!/bin/sh\n# gpuattest fleet job of dispatch %s (Kubernetes): the node container pulls\n# the staged dispatch by digest ($%s), checks it and runs the GPU steps;\n# the sign container signs its report with the job key.\nexec gpuattest fleet node --release \"$%s\" \"$1\"\n", id, ReleaseEnv, ReleaseEnv)
}
