package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/k8stest"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
)

// GPU products of the test cluster's kwok nodes.
const (
	a100Product = "NVIDIA-A100-SXM4-80GB"
	h100Product = "NVIDIA-H100-80GB-HBM3"
)

// kubeNodes are the package's Kubernetes nodes: two A100 nodes and one
// H100 node of 8 GPUs each.
var kubeNodes = []k8stest.Node{
	k8stest.GPUNode("gpu-a100-0", a100Product, 8),
	k8stest.GPUNode("gpu-a100-1", a100Product, 8),
	k8stest.GPUNode("gpu-h100-0", h100Product, 8),
}

// kubePipeline's GPU step fails if its environment, its parent's (the
// node process) or pid 1's names a key or the key mount, or if it can
// read the key mount or a service-account token.
var kubePipeline = fleettest.Pipeline("fleet-demo", "", `! env | grep -qi -e "PRIVATE KEY" -e /var/run/gpuattest/keys -e %KEYROOT% && ! cat /var/run/gpuattest/keys/*.key /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null && ! grep -qs -e "PRIVATE KEY" -e gpuattest/keys -e %KEYROOT% /proc/1/environ /proc/$PPID/environ`)

// kubeFleet is the same two classes as fleetFile, for Kubernetes: both
// engines' fields are there; engine: picks.
const kubeFleet = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: kubernetes
partition: gpu
sharedDir: /shared/unused
kubernetes:
  namespace: %NS%
  image: example.invalid/gpuattest@sha256:0000000000000000000000000000000000000000000000000000000000000000
  registry: %REGISTRY%/staging
classes:
  - name: a100
    gres: gpu:a100:%A100GPUS%
    product: NVIDIA-A100-SXM4-80GB
    constraint: sm_80
    nodes: 2
    targets: [sm_80]
    timeLimit: 5m
  - name: h100
    gres: gpu:h100:1
    product: NVIDIA-H100-80GB-HBM3
    constraint: sm_90
    targets: [sm_90]
    timeLimit: 5m
`

// kubeRun is a run --fleet on the test cluster, with the pods' commands
// run here as a kubelet would run them (fleettest.Kubelet).
type kubeRun struct {
	t    *testing.T
	c    *k8stest.Cluster
	k    *fleettest.Kubelet
	dir  string
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

// startKubeRun writes the project and fleet file (a100GPUS per A100
// node), and starts gpuattest run --fleet with the restricted user's
// kubeconfig.
func startKubeRun(t *testing.T, a100GPUs int, extraEnv ...string) *kubeRun {
	return startKubeRunArgs(t, a100GPUs, extraEnv)
}

// startKubeRunArgs is startKubeRun with further arguments to run.
func startKubeRunArgs(t *testing.T, a100GPUs int, extraEnv []string, runArgs ...string) *kubeRun {
	t.Helper()
	c := k8stest.Shared(t)
	reg := registrytest.StartDocker(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &kubeRun{t: t, c: c, k: fleettest.NewKubelet(t, c, self), dir: t.TempDir(), done: make(chan error, 1)}
	if err := os.MkdirAll(filepath.Join(r.dir, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(r.dir, "proj", "p.yaml"), strings.ReplaceAll(kubePipeline, "%KEYROOT%", r.k.KeyRoot()))
	fl := strings.NewReplacer("%NS%", c.Namespace, "%REGISTRY%", reg.Host, "%A100GPUS%", fmt.Sprint(a100GPUs)).Replace(kubeFleet)
	write(t, filepath.Join(r.dir, "fleet.yaml"), fl)
	if code, out := r.gpuattest("key", "generate", "--output-key-prefix", "rel", "--no-password"); code != 0 {
		t.Fatalf("key generate: exit %d\n%s", code, out)
	}
	args := []string{"run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run",
		"--simulate-gpus", "--timeout", "3m", "--kubeconfig", c.Restricted.Kubeconfig}
	r.start(extraEnv, append(args, runArgs...)...)
	return r
}

// start starts gpuattest with args as the run's process (serve waits for
// it), with extraEnv added to its environment.
func (r *kubeRun) start(extraEnv []string, args ...string) {
	t := r.t
	r.cmd = exec.Command(r.k.Gpuattest(), args...)
	r.out.Reset()
	r.cmd.Dir, r.cmd.Stdout, r.cmd.Stderr = r.dir, &r.out, &r.out
	r.cmd.Env = append(r.k.Env(), append([]string{"GPUATTEST_FLEET_POLL=300ms"}, extraEnv...)...)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := r.cmd
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-r.done
		}
	})
}

// gpuattest runs gpuattest in the run's directory.
func (r *kubeRun) gpuattest(args ...string) (int, string) {
	cmd := exec.Command(r.k.Gpuattest(), args...)
	cmd.Dir, cmd.Env = r.dir, r.k.Env()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return code, string(out)
}

// serve plays the kubelet (fleettest.Kubelet) until run --fleet exits,
// and returns run's exit code and output.
func (r *kubeRun) serve(ctx context.Context) (int, string) {
	r.t.Helper()
	kctx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		r.k.Serve(kctx)
	}()
	defer func() {
		stop()
		<-served
	}()
	select {
	case err := <-r.done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, r.out.String()
	case <-ctx.Done():
		r.t.Fatalf("run --fleet did not end: %v\n%s", ctx.Err(), r.out.String())
	}
	return 0, ""
}

// record reads the run's fleet.json.
func (r *kubeRun) record() *coordinate.State {
	st, err := coordinate.LoadState(filepath.Join(r.dir, "run"))
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

// gone waits until the API server no longer has path (admin's view).
func (r *kubeRun) gone(ctx context.Context, path string) error {
	for {
		err := r.c.Admin.Do(ctx, http.MethodGet, path, nil, nil)
		if k8stest.IsStatus(err, http.StatusNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still there: %v", path, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestKubeFleetEndToEnd runs a two-product fleet on the test cluster
// with the restricted user: one Indexed Job per class, scheduled by GPU
// product and capacity on distinct nodes, staged through docker-registry,
// the nodes' commands run as the pods'. The release verifies; the record
// names the server without credentials, the namespace, the Jobs' UIDs
// and manifest digests and the nodes; the Secrets are gone; a bundle
// that is another job's fails verify.
func TestKubeFleetEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	r := startKubeRun(t, 8)
	code, out := r.serve(ctx)
	if code != 0 {
		t.Fatalf("run --fleet: exit %d\n%s", code, out)
	}
	t.Logf("run --fleet:\n%s", out)
	for _, want := range []string{"3 job(s) submitted to kubernetes cluster", "namespace " + r.c.Namespace + " on https://127.0.0.1:", "fleet dispatch: PASSED",
		"target sm_80    a100-0, a100-1", "target sm_90    h100-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --fleet output lacks %q:\n%s", want, out)
		}
	}
	st := r.record()
	if st.Cluster.Engine != "kubernetes" || st.Cluster.Server != r.c.Server || st.Cluster.Namespace != r.c.Namespace || !strings.HasPrefix(st.Cluster.Version, "v1.") || len(st.Cluster.Objects) != 2 {
		t.Errorf("cluster %+v", st.Cluster)
	}
	for _, o := range st.Cluster.Objects {
		if o.Kind != "Job" || o.UID == "" || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(o.Manifest) {
			t.Errorf("object %+v", o)
		}
		if err := r.gone(ctx, "/api/v1/namespaces/"+r.c.Namespace+"/secrets/"+o.Name); err != nil {
			t.Errorf("the Secret of job keys outlived collection: %v", err)
		}
	}
	nodes := map[string]string{}
	for _, j := range st.Jobs {
		nodes[j.Name] = j.Status.Node
	}
	if !strings.HasPrefix(nodes["a100-0"], "gpu-a100-") || !strings.HasPrefix(nodes["a100-1"], "gpu-a100-") || nodes["a100-0"] == nodes["a100-1"] || nodes["h100-0"] != "gpu-h100-0" {
		t.Errorf("nodes %v: want the two A100 jobs on distinct A100 nodes, h100 on the H100 node", nodes)
	}
	if code, out := r.gpuattest("fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated"); code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") {
		t.Errorf("fleet verify: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "run", "nodes", "a100-0.intoto.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(r.dir, "run", "nodes", "a100-1.intoto.jsonl"), string(b))
	if code, out := r.gpuattest("fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated"); code != exitPolicy || !strings.Contains(out, "a100-1") {
		t.Errorf("fleet verify with a100-0's bundle as a100-1's: exit %d, want %d naming a100-1\n%s", code, exitPolicy, out)
	}
}

// TestKubeFleetUnschedulable: a class asking more GPUs than any node has
// stays Pending with the scheduler's reason, is reported failed once the
// schedule timeout passes, and the release fails naming the reason.
func TestKubeFleetUnschedulable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	r := startKubeRun(t, 16, "GPUATTEST_FLEET_SCHEDULE_TIMEOUT=10s")
	code, out := r.serve(ctx)
	if code != exitFailed || !strings.Contains(out, "Insufficient nvidia.com/gpu") || !strings.Contains(out, "fleet dispatch: FAILED") {
		t.Fatalf("run --fleet with a class asking 16 GPUs a node: exit %d, want %d naming Insufficient nvidia.com/gpu\n%s", code, exitFailed, out)
	}
	t.Logf("run --fleet:\n%s", out)
	for _, o := range r.record().Cluster.Objects {
		if o.Class == "a100" {
			if err := r.gone(ctx, "/apis/batch/v1/namespaces/"+r.c.Namespace+"/jobs/"+o.Name); err != nil {
				t.Errorf("the unschedulable Job was left: %v", err)
			}
		}
	}
}

// TestKubeFleetInterrupt: Ctrl-C deletes the Jobs (foreground, with
// their pods) and their Secrets; run exits 130.
func TestKubeFleetInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := startKubeRun(t, 8)
	if _, err := r.c.WaitPods(ctx, r.c.Namespace, "gpuattest.dev/class", k8stest.Running(3)); err != nil {
		t.Fatalf("%v\n%s", err, r.out.String())
	}
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-r.done:
	case <-ctx.Done():
		t.Fatalf("run --fleet did not stop on SIGINT\n%s", r.out.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("run --fleet on SIGINT: %v, want exit %d\n%s", err, exitInterrupted, r.out.String())
	}
	st := r.record()
	if len(st.Cluster.Objects) != 2 {
		t.Fatalf("objects %+v", st.Cluster.Objects)
	}
	for _, o := range st.Cluster.Objects {
		for _, path := range []string{"/apis/batch/v1/namespaces/" + r.c.Namespace + "/jobs/" + o.Name, "/api/v1/namespaces/" + r.c.Namespace + "/secrets/" + o.Name} {
			if err := r.gone(ctx, path); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := r.c.WaitPods(ctx, r.c.Namespace, "gpuattest.dev/class", func(p []k8stest.Pod) bool { return len(p) == 0 }); err != nil {
		t.Errorf("pods left after Ctrl-C: %v", err)
	}
}

// TestKubeFleetForbidden: an identity that may not create Secrets gets
// the API server's refusal with the Role it needs, and nothing is left.
func TestKubeFleetForbidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := k8stest.Shared(t)
	u, err := c.NewUser(ctx, c.Namespace, []k8stest.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "delete"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := startKubeRunArgs(t, 8, nil, "--kubeconfig", u.Kubeconfig)
	code, out := r.serve(ctx)
	if code != exitFailed || !strings.Contains(out, "forbidden") || !strings.Contains(out, "hint: in the namespace, the identity needs") {
		t.Fatalf("run --fleet as a user that may not create Secrets: exit %d, want %d with the hint\n%s", code, exitFailed, out)
	}
	var jobs struct{ Items []any }
	if err := c.Admin.Do(ctx, http.MethodGet, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs", nil, &jobs); err != nil || len(jobs.Items) != 0 {
		t.Errorf("jobs left: %v %v", jobs.Items, err)
	}
}
