package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/k8stest"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
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
const kubePipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: fleet-demo
targets: [sm_80, sm_90]
steps:
  - id: build
    run: mkdir -p out && echo kernel > out/kernels.fatbin && printf '#!/bin/sh\necho harness ok\n' > out/harness && chmod +x out/harness
    outputs: [out/kernels.fatbin, out/harness]
  - id: check
    gpu: true
    needs: [build]
    run: ./out/harness && test "$(cat out/kernels.fatbin)" = kernel && ! env | grep -qi -e "PRIVATE KEY" -e /var/run/gpuattest/keys -e %KEYROOT% && ! cat /var/run/gpuattest/keys/*.key /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null && ! grep -qs -e "PRIVATE KEY" -e gpuattest/keys -e %KEYROOT% /proc/1/environ /proc/$PPID/environ
`

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
// run here as a kubelet would run them.
type kubeRun struct {
	t        *testing.T
	c        *k8stest.Cluster
	dir, bin string
	keyRoot  string
	cmd      *exec.Cmd
	out      bytes.Buffer
	done     chan error
	mu       sync.Mutex
	handled  map[string]bool
	// evict, when set, is the job (class-index) whose first pod is
	// evicted; no other pod is run until its retry is Running, so that
	// every other pod of its class still holds its node and the retry
	// lands on a node of its own (anti-affinity does not count pods that
	// ended).
	evict, retry string
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
	r := &kubeRun{t: t, c: c, dir: t.TempDir(), handled: map[string]bool{}, done: make(chan error, 1)}
	r.keyRoot = filepath.Join(r.dir, "mnt")
	r.bin = filepath.Join(r.dir, "bin")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"proj", "bin", "mnt"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(self, filepath.Join(r.bin, "gpuattest")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(r.dir, "proj", "p.yaml"), strings.ReplaceAll(kubePipeline, "%KEYROOT%", r.keyRoot))
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
	r.cmd = exec.Command(filepath.Join(r.bin, "gpuattest"), args...)
	r.out.Reset()
	r.cmd.Dir, r.cmd.Stdout, r.cmd.Stderr = r.dir, &r.out, &r.out
	r.cmd.Env = append(r.env(), append([]string{"GPUATTEST_FLEET_POLL=300ms"}, extraEnv...)...)
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

// env is the environment of every process the test runs.
func (r *kubeRun) env() []string {
	return []string{"PATH=" + r.bin + ":" + os.Getenv("PATH"), "HOME=" + r.dir, "TMPDIR=" + r.t.TempDir(), "GPUATTEST_PASSWORD="}
}

// gpuattest runs gpuattest in the run's directory.
func (r *kubeRun) gpuattest(args ...string) (int, string) {
	cmd := exec.Command(filepath.Join(r.bin, "gpuattest"), args...)
	cmd.Dir, cmd.Env = r.dir, r.env()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return code, string(out)
}

// serve plays the kubelet until run --fleet exits: each pod that became
// Running gets its node container's command and then its sign
// container's command run here, with the environment the pod's spec
// gives and its Secret written as the volume would mount it; then the
// pod ends with the sign container's exit code. It returns run's exit
// code and output.
func (r *kubeRun) serve(ctx context.Context) (int, string) {
	r.t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-r.done:
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			return code, r.out.String()
		case <-ctx.Done():
			r.t.Fatalf("run --fleet did not end: %v\n%s", ctx.Err(), r.out.String())
		case <-tick.C:
		}
		pods, err := r.c.ListPods(ctx, r.c.Namespace, "gpuattest.dev/class")
		if err != nil {
			continue
		}
		for _, p := range r.next(pods) {
			r.handled[p.Name] = true
			r.runPod(ctx, p)
		}
	}
}

// next are the Running pods to run now, in order: with an eviction to
// make, the victim alone; while its retry is not Running, none.
func (r *kubeRun) next(pods []k8stest.Pod) []k8stest.Pod {
	var run []k8stest.Pod
	for _, p := range pods {
		if p.Phase != "Running" || r.handled[p.Name] {
			continue
		}
		job := p.Labels["gpuattest.dev/class"] + "-" + p.Env["GPUATTEST_FLEET_INDEX"]
		switch {
		case r.evict != "" && job == r.evict:
			return []k8stest.Pod{p}
		case r.retry != "" && job == r.retry:
			r.retry = ""
			return append([]k8stest.Pod{p}, run...)
		}
		run = append(run, p)
	}
	if r.evict != "" || r.retry != "" {
		return nil
	}
	return run
}

// podContainers are the containers of a pod as its spec gives them.
type podContainers struct {
	Spec struct {
		AutomountServiceAccountToken *bool `json:"automountServiceAccountToken"`
		Containers                   []struct {
			Name         string   `json:"name"`
			Command      []string `json:"command"`
			VolumeMounts []struct {
				Name      string `json:"name"`
				MountPath string `json:"mountPath"`
				ReadOnly  bool   `json:"readOnly"`
			} `json:"volumeMounts"`
		} `json:"containers"`
	} `json:"spec"`
}

// runPod runs pod p's two containers' commands here and ends the pod.
func (r *kubeRun) runPod(ctx context.Context, p k8stest.Pod) {
	t := r.t
	job := p.Labels["gpuattest.dev/class"] + "-" + p.Env["GPUATTEST_FLEET_INDEX"]
	if job == r.evict {
		r.evict, r.retry = "", job
		if err := r.c.FailPod(ctx, p.Namespace, p.Name, "Evicted", "The node was low on resource: memory."); err != nil {
			t.Fatal(err)
		}
		return
	}
	var spec podContainers
	if err := json.Unmarshal(p.Raw, &spec); err != nil {
		t.Fatal(err)
	}
	// The keys reach the sign container alone; no token is mounted.
	if a := spec.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("pod %s mounts a service-account token", p.Name)
	}
	if len(spec.Spec.Containers) != 2 || spec.Spec.Containers[0].Name != "node" || spec.Spec.Containers[1].Name != "sign" {
		t.Fatalf("pod %s: containers %+v", p.Name, spec.Spec.Containers)
	}
	for _, vm := range spec.Spec.Containers[0].VolumeMounts {
		if vm.Name == "keys" {
			t.Errorf("pod %s: the node container mounts the keys", p.Name)
		}
	}
	secret := ""
	for _, v := range p.Volumes {
		if v.Name == "keys" {
			secret = v.SecretName
		}
	}
	data, err := r.c.SecretData(ctx, p.Namespace, secret)
	if err != nil {
		t.Fatalf("pod %s: its Secret %q: %v", p.Name, secret, err)
	}
	keys := filepath.Join(r.keyRoot, p.Name)
	report := filepath.Join(r.dir, "report-"+p.Name)
	for _, d := range []string{keys, report} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(keys, k), v, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	env := r.env()
	for k, v := range p.Env {
		env = append(env, k+"="+v)
	}
	env = append(env, "GPUATTEST_FLEET_REPORT_DIR="+report)
	node := spec.Spec.Containers[0].Command
	nodeCmd := exec.CommandContext(ctx, node[0], node[1:]...)
	nodeCmd.Env, nodeCmd.Dir = env, r.t.TempDir()
	if out, err := nodeCmd.CombinedOutput(); err != nil {
		t.Logf("pod %s node container: %v\n%s", p.Name, err, out)
	}
	sign := spec.Spec.Containers[1].Command
	signCmd := exec.CommandContext(ctx, sign[0], sign[1:]...)
	signCmd.Env, signCmd.Dir = append(env, "GPUATTEST_FLEET_KEY_DIR="+keys), r.t.TempDir()
	code := 0
	if out, err := signCmd.CombinedOutput(); err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		t.Logf("pod %s sign container: exit %d\n%s", p.Name, code, out)
	}
	if err := r.c.FinishPod(ctx, p.Namespace, p.Name, code); err != nil {
		t.Fatal(err)
	}
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

// TestKubeFleetEvicted: an evicted pod's index runs again alone and the
// release passes; the record counts the restart.
func TestKubeFleetEvicted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	r := startKubeRun(t, 8)
	r.evict = "a100-1"
	code, out := r.serve(ctx)
	if code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") {
		t.Fatalf("run --fleet with a100-1 evicted once: exit %d\n%s", code, out)
	}
	t.Logf("run --fleet:\n%s", out)
	for _, j := range r.record().Jobs {
		if want := map[string]int{"a100-1": 1}[j.Name]; j.Status.Restarts != want {
			t.Errorf("job %s: %d restarts, want %d", j.Name, j.Status.Restarts, want)
		}
	}
	if !strings.Contains(out, "Evicted") {
		t.Errorf("no progress line names the eviction:\n%s", out)
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

// TestKubeFleetDetach: run --detach submits and exits; fleet collect,
// with the same kubeconfig, waits for the jobs and collects the bundles
// from the registry.
func TestKubeFleetDetach(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	r := startKubeRunArgs(t, 8, nil, "--detach")
	if code, out := r.serve(ctx); code != 0 || !strings.Contains(out, "detached; collect it with: gpuattest fleet collect run") {
		t.Fatalf("run --fleet --detach: exit %d\n%s", code, out)
	}
	r.start(nil, "fleet", "collect", "run", "--kubeconfig", r.c.Restricted.Kubeconfig)
	if code, out := r.serve(ctx); code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") {
		t.Fatalf("fleet collect: exit %d\n%s", code, out)
	}
	if st := r.record(); !st.Done {
		t.Errorf("the record is not done after collect")
	}
}

// TestKubeFleetTimeout: --timeout cancels as Ctrl-C does: the Jobs and
// Secrets are deleted and run fails.
func TestKubeFleetTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := startKubeRunArgs(t, 8, nil, "--timeout", "3s")
	var err error
	select {
	case err = <-r.done: // nobody plays the kubelet: the pods stay Running
	case <-ctx.Done():
		t.Fatalf("run --fleet --timeout 3s did not stop\n%s", r.out.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailed || !strings.Contains(r.out.String(), "did not finish in time") {
		t.Errorf("run --fleet --timeout 3s: %v, want exit %d\n%s", err, exitFailed, r.out.String())
	}
	for _, o := range r.record().Cluster.Objects {
		for _, path := range []string{"/apis/batch/v1/namespaces/" + r.c.Namespace + "/jobs/" + o.Name, "/api/v1/namespaces/" + r.c.Namespace + "/secrets/" + o.Name} {
			if err := r.gone(ctx, path); err != nil {
				t.Error(err)
			}
		}
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
