package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
)

// Release is what a job on Kubernetes needs besides Config: the staged
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

// Report is the node container's side of a job on Kubernetes: it
// pulls the staged dispatch by digest, runs the job as Run does
// (every staged file checked against the dispatch, the GPU steps run,
// never holding the job key) and writes the unsigned predicate to
// ReportDir/ReportFile for Sign. A node that fails, or cannot pull
// the dispatch, still reports why, and Report returns ErrNodeFailed.
func Report(ctx context.Context, n Config, r Release) (*dispatch.Node, error) {
	pred, runErr, err := report(ctx, &n, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // stopped: report nothing; the pod ends anyway
		}
		// The node could not start (the registry, a dispatch without the
		// job): it still reports why, and the sign container signs that.
		now := time.Now().UTC()
		pred = &dispatch.Node{Engine: n.Engine, JobID: n.JobID, NodeName: n.NodeName, Arch: runtime.GOARCH, Result: dispatch.ResultFailed, Reason: err.Error(),
			Steps: []dispatch.Step{}, StartedAt: now, FinishedAt: now}
		runErr = err
	}
	b, err := json.Marshal(pred)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(r.ReportDir, stagefs.ReportFile), b, 0o644); err != nil {
		return nil, fmt.Errorf("writing the node's report: %w", err)
	}
	if runErr != nil {
		return pred, fmt.Errorf("%w: job %s-%d on %s: %w", ErrNodeFailed, r.Class, r.Index, n.NodeName, runErr)
	}
	return pred, nil
}

// report pulls the staged dispatch and runs the job: the predicate,
// why the node failed, and an error when it could not run at all.
func report(ctx context.Context, n *Config, r Release) (*dispatch.Node, error, error) {
	if !strings.Contains(r.Ref, "@sha256:") {
		return nil, nil, fmt.Errorf("the staged dispatch %q is not named by digest", r.Ref)
	}
	dir := filepath.Join(r.Work, "dispatch")
	if _, err := oci.PullFiles(ctx, r.Ref, dir, nil, r.Options...); err != nil {
		return nil, nil, fmt.Errorf("pulling the staged dispatch: %w", err)
	}
	n.Dir, n.Job = dir, fmt.Sprintf("%s-%d", r.Class, r.Index)
	l, err := loadDispatch(filepath.Join(dir, stagefs.DispatchFile), n.Job)
	if err != nil {
		return nil, nil, err
	}
	// The host-runner steps run in this container, which holds no key:
	// the statement names no sandbox of the node's own.
	n.podSandbox = true
	// No step may name the key's path, though this container has none.
	return n.execute(ctx, l, filepath.Join(r.KeyDir, strconv.Itoa(r.Index)+".key"))
}

// reportPoll is how often Sign looks for the node's report.
const reportPoll = time.Second

// Sign is the sign container's side of a job on Kubernetes: it
// pulls the dispatch alone by digest, loads the job key of its index
// from KeyDir and checks it is the one the dispatch delegated to the
// job, waits for the node container's report, signs it as the job's
// node statement (the dispatch's digest, the job's name and nonce, and
// the engine, job ID and node name from its own environment, whatever
// the report says) and pushes the bundle to the staging Repository
// under NodeTag. It returns ErrNodeFailed when the report says the node
// failed.
func Sign(ctx context.Context, n Config, r Release) (*dispatch.Node, error) {
	if !strings.Contains(r.Ref, "@sha256:") {
		return nil, fmt.Errorf("the staged dispatch %q is not named by digest", r.Ref)
	}
	dir := filepath.Join(r.Work, "dispatch")
	if _, err := oci.PullFiles(ctx, r.Ref, dir, []string{stagefs.DispatchFile}, r.Options...); err != nil {
		return nil, fmt.Errorf("%w: pulling the dispatch: %w", stagefs.ErrRegistry, err)
	}
	job := fmt.Sprintf("%s-%d", r.Class, r.Index)
	l, err := loadDispatch(filepath.Join(dir, stagefs.DispatchFile), job)
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
	pred, err := waitReport(ctx, filepath.Join(r.ReportDir, stagefs.ReportFile))
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
	out := filepath.Join(r.Work, stagefs.NodeFile)
	if err := sign.WriteJSONL(out, [][]byte{b}); err != nil {
		return nil, err
	}
	if err := pushNode(ctx, out, stagefs.Repository(r.Ref)+":"+stagefs.NodeTag(l.d.ID, job), r.Options); err != nil {
		return nil, err
	}
	if pred.Result != dispatch.ResultPassed {
		return pred, fmt.Errorf("%w: job %s on %s: %s", ErrNodeFailed, job, n.NodeName, pred.Reason)
	}
	return pred, nil
}

// waitReport waits for the node's report and reads it.
func waitReport(ctx context.Context, path string) (*dispatch.Node, error) {
	t := time.NewTicker(reportPoll)
	defer t.Stop()
	for {
		b, err := limits.ReadFile(path, 64<<20, "node report")
		if err == nil {
			// It crosses from the node container, which runs the
			// pipeline's code, to the one that holds the key: read strictly.
			pred, err := dispatch.ReadNode(path, b)
			if err != nil {
				return nil, fmt.Errorf("reading the node's report: %w", err)
			}
			return pred, nil
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
	rel, err := oci.NewRelease([]oci.File{{Name: stagefs.NodeFile, Path: file, SHA256: strings.TrimPrefix(stagefs.DigestOf(b), "sha256:"), Size: int64(len(b))}})
	if err != nil {
		return err
	}
	if _, err := oci.Push(ctx, ref, rel, nil, opts...); err != nil {
		return fmt.Errorf("%w: pushing the node bundle to %s: %w", stagefs.ErrRegistry, ref, err)
	}
	return nil
}
