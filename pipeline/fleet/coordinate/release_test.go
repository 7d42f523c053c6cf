package coordinate_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
	"github.com/gpuattest/gpuattest/pipeline/fleet/node"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// releasePipeline builds a kernel and a harness here; its GPU step runs
// on each node and fails if it can read a job key at the mount path the
// test gives it ($KEYS, which the node's environment must not carry).
var releasePipeline = fleettest.Pipeline("kube-demo", "", `! env | grep -q gpuattest-keys && ! cat "$KEYS"/*.key`)

const releaseFleet = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: kubernetes
kubernetes:
  namespace: gpu
  image: example.invalid/gpuattest@sha256:0000000000000000000000000000000000000000000000000000000000000000
  registry: %REGISTRY%/staging
classes:
  - name: a100
    product: NVIDIA-A100-SXM4-80GB
    gpus: 2
    nodes: 2
    targets: [sm_80]
  - name: h100
    product: NVIDIA-H100-80GB-HBM3
    gpus: 1
    targets: [sm_90]
`

// TestStagedThroughRegistry stages a dispatch for Kubernetes through a
// real docker-registry (no referrers API) and runs each job's two
// containers locally, as their pods would: the node side pulls the
// dispatch by digest, checks and runs it and reports; the sign side,
// given the class's keys as the Secret mounts them, signs and pushes the
// node bundle. Collect fetches the bundles back and the release
// verifies. A job whose bundle is signed with another job's key fails.
func TestStagedThroughRegistry(t *testing.T) {
	reg := registrytest.StartDocker(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "proj")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "p.yaml"), []byte(releasePipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(filepath.Join(root, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := fleet.Parse("fleet.yaml", []byte(strings.ReplaceAll(releaseFleet, "%REGISTRY%", reg.Host)))
	if err != nil {
		t.Fatal(err)
	}
	build, _ := coordinate.Split(p)
	res, err := run.Pipeline(t.Context(), build, run.WithOutDir(filepath.Join(dir, "run", "build")))
	if err != nil || !res.Passed() {
		t.Fatalf("build: %v", err)
	}
	signer := fleettest.OwnerSigner(t)
	prep, err := coordinate.Prepare(t.Context(), coordinate.Stage{Pipeline: p, BuildDir: res.Dir, Fleet: spec, Signer: signer,
		StageDir: filepath.Join(dir, "run", "stage"), Cluster: fleet.Cluster{Engine: "kubernetes", Server: "https://127.0.0.1:6443", Namespace: "gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(prep.Release, reg.Host+"/staging@sha256:") || prep.Dispatch.Fleet.Namespace != "gpu" || prep.Dispatch.Fleet.Server != "https://127.0.0.1:6443" || prep.Dispatch.Fleet.Registry != reg.Host+"/staging" {
		t.Fatalf("release %q, fleet %+v", prep.Release, prep.Dispatch.Fleet)
	}
	for _, f := range prep.Dispatch.Staged {
		if f.Path == "bin/gpuattest" {
			t.Errorf("the binary was staged for Kubernetes; the pod image holds it")
		}
	}
	st := &coordinate.State{Dispatch: prep.Dir, DispatchDigest: prep.Digest, Release: prep.Release, Simulated: true, Cluster: fleet.Cluster{Engine: "kubernetes"}}
	keys := map[string][]byte{}
	for _, j := range prep.Dispatch.Jobs {
		st.Jobs = append(st.Jobs, coordinate.JobState{Name: j.Name, Class: j.Class, Index: j.Index, ID: "job/" + strconv.Itoa(j.Index)})
		if keys[j.Name] = prep.Key(j.Name); keys[j.Name] == nil {
			t.Fatalf("no key for job %s", j.Name)
		}
		// Through a registry the keys go to the engine, never to disk.
		if _, err := os.Stat(coordinate.KeyPath(prep.Dir, j.Name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("job %s's key is on disk in the staging directory (%v)", j.Name, err)
		}
	}
	for _, j := range prep.Dispatch.Jobs {
		runJob(t, prep, j, keys, dir)
	}
	out := filepath.Join(dir, "run")
	col, err := coordinate.Collect(t.Context(), st, out, dispatch.Options{AllowSimulated: true})
	if err != nil {
		t.Fatal(err)
	}
	if !col.Report.Verified || len(col.Missing) != 0 || len(col.Report.Jobs) != 3 {
		t.Fatalf("collect: verified %v, missing %v, problems %v", col.Report.Verified, col.Missing, col.Report.Problems)
	}
	for _, row := range col.Report.Jobs {
		if row.Node != "node-"+row.Job || !row.Simulated || row.JobID != "gpuattest-x/"+strings.TrimPrefix(row.Job, row.Class+"-") || row.Arch != runtime.GOARCH {
			t.Errorf("row %+v", row)
		}
		// The host-runner step ran in the node container, which holds no
		// key: the node names no sandbox of its own (docs/fleet.md).
		if row.Sandbox != "" {
			t.Errorf("job %s: sandbox %q in its node statement, want none named on Kubernetes", row.Job, row.Sandbox)
		}
	}
	if col.Report.HostSteps != dispatch.HostStepsPod {
		t.Errorf("the report's host steps %q, want %q", col.Report.HostSteps, dispatch.HostStepsPod)
	}
	// a100-1's bundle signed with a100-0's key: node.Sign refuses the key,
	// and a bundle made so anyway fails verify.
	n := node.Config{Engine: "kubernetes", NodeName: "node-a100-1"}
	kdir := keyDir(t, dir, map[string][]byte{"1": keys["a100-0"]})
	_, err = node.Sign(t.Context(), n, node.Release{Ref: prep.Release, Class: "a100", Index: 1, Work: t.TempDir(), ReportDir: t.TempDir(), KeyDir: kdir})
	if err == nil || !strings.Contains(err.Error(), "not the one the dispatch delegated to job a100-1") {
		t.Errorf("node.Sign with another job's key: %v", err)
	}
	forged := filepath.Join(out, coordinate.NodesDir, "a100-1.intoto.jsonl")
	if err := os.WriteFile(forged, forgeNode(t, prep, "a100-1", keys["a100-0"]), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := coordinate.VerifyDir(t.Context(), out, nil, dispatch.Options{AllowSimulated: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || !strings.Contains(strings.Join(r.Problems, "\n"), "a100-1") {
		t.Errorf("a bundle signed with another job's key verified: %v", r.Problems)
	}
}

// runJob runs job j's two containers as its pod would.
func runJob(t *testing.T, prep *coordinate.Prepared, j dispatch.Job, keys map[string][]byte, dir string) {
	t.Helper()
	// The Secret of the class: every index's key, mounted 0400.
	class := map[string][]byte{}
	for name, k := range keys {
		if c, idx, _ := strings.Cut(name, "-"); c == j.Class {
			class[idx] = k
		}
	}
	kdir := keyDir(t, dir, class)
	report := t.TempDir()
	// The node container: no key anywhere in its environment.
	env := append(os.Environ(), "KEYS="+kdir)
	n := node.Config{Engine: "kubernetes", JobID: fmt.Sprintf("gpuattest-x/%d", j.Index), NodeName: "node-" + j.Name, Simulate: true, Env: env}
	rel := node.Release{Ref: prep.Release, Class: j.Class, Index: j.Index, Work: filepath.Join(t.TempDir(), "w"), ReportDir: report, KeyDir: kdir}
	if err := os.MkdirAll(rel.Work, 0o755); err != nil {
		t.Fatal(err)
	}
	pred, err := node.Report(t.Context(), n, rel)
	if err != nil {
		t.Fatalf("node side of %s: %v", j.Name, err)
	}
	if pred.Result != dispatch.ResultPassed || pred.Sandbox != "" {
		t.Fatalf("node %s: %s, sandbox %q (want passed, no sandbox named)", j.Name, pred.Reason, pred.Sandbox)
	}
	sn := node.Config{Engine: "kubernetes", JobID: n.JobID, NodeName: n.NodeName}
	rel.Work = t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60e9)
	defer cancel()
	if _, err := node.Sign(ctx, sn, rel); err != nil {
		t.Fatalf("sign side of %s: %v", j.Name, err)
	}
}

// keyDir writes keys (index -> PEM) as a Secret volume holds them.
func keyDir(t *testing.T, dir string, keys map[string][]byte) string {
	t.Helper()
	d, err := os.MkdirTemp(dir, "gpuattest-keys-")
	if err != nil {
		t.Fatal(err)
	}
	for idx, k := range keys {
		if err := os.WriteFile(filepath.Join(d, idx+".key"), k, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// forgeNode is a passing node statement for job signed with key.
func forgeNode(t *testing.T, prep *coordinate.Prepared, job string, key []byte) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "k.key")
	if err := os.WriteFile(p, key, 0o600); err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadPrivateKey(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	j := prep.Dispatch.Job(job)
	pred := &dispatch.Node{Dispatch: prep.Digest, Job: job, Nonce: j.Nonce, Engine: "kubernetes", NodeName: "x", Result: dispatch.ResultPassed, Steps: []dispatch.Step{}}
	stmt, err := pred.Statement(prep.Subjects)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Sign(t.Context(), stmt)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestReportNodeCannotPull: a node container that cannot pull the
// dispatch still reports why, for the sign container to sign.
func TestReportNodeCannotPull(t *testing.T) {
	reg := registrytest.StartDocker(t)
	report := t.TempDir()
	ref := reg.Host + "/staging@sha256:" + strings.Repeat("0", 64)
	pred, err := node.Report(t.Context(), node.Config{NodeName: "n1"}, node.Release{Ref: ref, Class: "a100", Index: 0, Work: t.TempDir(), ReportDir: report, KeyDir: t.TempDir()})
	if !errors.Is(err, node.ErrNodeFailed) || pred == nil || pred.Result != dispatch.ResultFailed || !strings.Contains(pred.Reason, "pulling the staged dispatch") {
		t.Fatalf("node.Report of a release that is not there: %+v, %v", pred, err)
	}
	b, err := os.ReadFile(filepath.Join(report, coordinate.ReportFile))
	if err != nil || !strings.Contains(string(b), `"result":"failed"`) {
		t.Errorf("report %s, %v", b, err)
	}
}
