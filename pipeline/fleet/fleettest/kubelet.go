package fleettest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/k8stest"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
)

// Kubelet plays the kubelet of a k8stest cluster (whose kwok nodes run
// nothing) for the fleet's pods: each pod of a fleet job that becomes
// Running gets its node container's command and then its sign
// container's run here, with the environment its spec gives and its
// Secret written as the volume would mount it, and ends with the sign
// container's exit status. A pod deleted meanwhile (a cancelled Job) has
// its commands killed. It checks what every pod must hold: no
// service-account token, the keys mounted in the sign container alone.
type Kubelet struct {
	t   *testing.T
	c   *k8stest.Cluster
	dir string
	env []string

	mu      sync.Mutex
	started map[string]context.CancelFunc // by pod name
	kill    map[string]bool               // jobs (class-index) whose pod ends failed
	evict   map[string]bool               // jobs whose pod is evicted once
	wg      sync.WaitGroup
}

// NewKubelet returns the kubelet of c's fleet pods, whose commands run
// bin as gpuattest (first on PATH), with HOME and TMPDIR fresh
// directories, and env added.
func NewKubelet(t *testing.T, c *k8stest.Cluster, bin string, env ...string) *Kubelet {
	t.Helper()
	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "gpuattest")); err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{t: t, c: c, dir: dir, started: map[string]context.CancelFunc{}, kill: map[string]bool{}, evict: map[string]bool{}}
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	k.env = append([]string{"PATH=" + binDir + ":" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + tmp, "GPUATTEST_PASSWORD="}, env...)
	return k
}

// Env is the environment the pods' commands start from: PATH (with
// gpuattest first), HOME, TMPDIR and NewKubelet's env.
func (k *Kubelet) Env() []string { return k.env }

// Gpuattest is the gpuattest the pods' commands run: the one first on
// Env's PATH.
func (k *Kubelet) Gpuattest() string { return filepath.Join(k.dir, "bin", "gpuattest") }

// KeyRoot is the directory the pods' keys are written under.
func (k *Kubelet) KeyRoot() string { return filepath.Join(k.dir, "mnt") }

// Start runs the pods in the background until the test ends.
func (k *Kubelet) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Serve(ctx)
	}()
	k.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// Serve runs the fleet's pods until ctx ends, and returns once their
// commands ended.
func (k *Kubelet) Serve(ctx context.Context) {
	defer k.wg.Wait()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods, err := k.c.ListPods(ctx, k.c.Namespace, "gpuattest.dev/class")
		if err != nil {
			continue
		}
		k.step(ctx, pods)
	}
}

// step starts the commands of each Running pod not yet started, and
// stops those of the started pods no longer listed.
func (k *Kubelet) step(ctx context.Context, pods []k8stest.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	listed := map[string]bool{}
	for _, p := range pods {
		listed[p.Name] = !deleting(p)
		if p.Phase != "Running" || k.started[p.Name] != nil {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		k.started[p.Name] = cancel
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			k.runPod(pctx, p)
		}()
	}
	for name, cancel := range k.started {
		if !listed[name] {
			cancel()
		}
	}
}

// Kill makes job's pod fail before it signs, as a node lost or killed
// would: its index fails, with no node bundle (the suite's Killer).
func (k *Kubelet) Kill(_ *testing.T, _ *coordinate.State, job string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kill[job] = true
}

// Preempt evicts job's pod before it signs; the Job controller runs its
// index again in a new pod (the suite's Preempter).
func (k *Kubelet) Preempt(_ *testing.T, _ *coordinate.State, job string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.evict[job] = true
}

// podContainers are the containers of a pod as its spec gives them.
type podContainers struct {
	Spec struct {
		AutomountServiceAccountToken *bool `json:"automountServiceAccountToken"`
		Containers                   []struct {
			Name         string   `json:"name"`
			Command      []string `json:"command"`
			VolumeMounts []struct {
				Name string `json:"name"`
			} `json:"volumeMounts"`
		} `json:"containers"`
	} `json:"spec"`
}

// check checks pod p's spec and returns its node and sign commands.
func (k *Kubelet) check(p k8stest.Pod) (node, sign []string, ok bool) {
	var spec podContainers
	if err := json.Unmarshal(p.Raw, &spec); err != nil {
		k.t.Errorf("pod %s: %v", p.Name, err)
		return nil, nil, false
	}
	if a := spec.Spec.AutomountServiceAccountToken; a == nil || *a {
		k.t.Errorf("pod %s mounts a service-account token", p.Name)
	}
	cs := spec.Spec.Containers
	if len(cs) != 2 || cs[0].Name != "node" || cs[1].Name != "sign" {
		k.t.Errorf("pod %s: containers %+v, want node and sign", p.Name, cs)
		return nil, nil, false
	}
	for _, vm := range cs[0].VolumeMounts {
		if vm.Name == "keys" {
			k.t.Errorf("pod %s: the node container mounts the keys", p.Name)
		}
	}
	return cs[0].Command, cs[1].Command, true
}

// runPod runs pod p's two containers' commands here and ends the pod.
func (k *Kubelet) runPod(ctx context.Context, p k8stest.Pod) {
	node, sign, ok := k.check(p)
	if !ok {
		return
	}
	job := p.Labels["gpuattest.dev/class"] + "-" + p.Env[fleet.IndexEnv]
	keys, report, err := k.mount(ctx, p)
	if k8stest.IsStatus(err, http.StatusNotFound) || (err != nil && ctx.Err() != nil) {
		// The Job is being deleted (a cancel): its Secret went first, or
		// the pod was deleted (its context cancelled) while its Secret
		// was read.
		k.t.Logf("pod %s: %v", p.Name, err)
		return
	}
	if err != nil {
		k.t.Errorf("pod %s: %v", p.Name, err)
		return
	}
	env := append([]string(nil), k.env...)
	for name, v := range p.Env {
		env = append(env, name+"="+v)
	}
	env = append(env, "GPUATTEST_FLEET_REPORT_DIR="+report)
	if code, out := k.exec(ctx, node, env); code != 0 {
		k.t.Logf("pod %s node container: exit %d\n%s", p.Name, code, out)
	}
	if ctx.Err() != nil {
		return // the pod was deleted
	}
	k.mu.Lock()
	killed, evicted := k.kill[job], k.evict[job]
	delete(k.kill, job)
	delete(k.evict, job)
	k.mu.Unlock()
	end := context.WithoutCancel(ctx)
	switch {
	case evicted:
		err = k.c.FailPod(end, p.Namespace, p.Name, "Evicted", "The node was low on resource: memory.")
	case killed:
		err = k.c.FinishPod(end, p.Namespace, p.Name, 1)
	default:
		code, out := k.exec(ctx, sign, append(env, "GPUATTEST_FLEET_KEY_DIR="+keys))
		if code != 0 {
			k.t.Logf("pod %s sign container: exit %d\n%s", p.Name, code, out)
		}
		if ctx.Err() != nil {
			return
		}
		err = k.c.FinishPod(end, p.Namespace, p.Name, code)
	}
	switch {
	case k8stest.IsStatus(err, http.StatusNotFound):
		// Deleted (its Job cancelled) after its commands ended and
		// before the kubelet saw it go: nothing is left to end.
		k.t.Logf("ending pod %s: %v", p.Name, err)
	case err != nil:
		k.t.Errorf("ending pod %s: %v", p.Name, err)
	}
}

// mount writes pod p's Secret as its keys volume would show it, and
// makes its report directory.
func (k *Kubelet) mount(ctx context.Context, p k8stest.Pod) (keys, report string, err error) {
	secret := ""
	for _, v := range p.Volumes {
		if v.Name == "keys" {
			secret = v.SecretName
		}
	}
	data, err := k.c.SecretData(ctx, p.Namespace, secret)
	if err != nil {
		return "", "", err
	}
	keys = filepath.Join(k.KeyRoot(), p.Name)
	report = filepath.Join(k.dir, "report-"+p.Name)
	for _, d := range []string{keys, report} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
	}
	for name, v := range data {
		if err := os.WriteFile(filepath.Join(keys, name), v, 0o400); err != nil {
			return "", "", err
		}
	}
	return keys, report, nil
}

// exec runs a container's command with env in a fresh directory and
// returns its exit status (1 when it could not start) and output.
func (k *Kubelet) exec(ctx context.Context, command, env []string) (int, string) {
	name := command[0]
	if name == "gpuattest" { // as the image's PATH would find it
		name = k.Gpuattest()
	}
	cmd := exec.CommandContext(ctx, name, command[1:]...)
	// A pod deleted kills its commands' process group, and does not
	// wait for what holds their output open.
	inGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	dir, err := os.MkdirTemp(k.dir, "work-")
	if err != nil {
		return 1, err.Error()
	}
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		return 1, err.Error() + "\n" + string(out)
	}
	return 0, string(out)
}

// deleting reports whether pod p is being deleted (a deletion timestamp
// set): its commands stop as a kubelet stops its containers.
func deleting(p k8stest.Pod) bool {
	var m struct {
		Metadata struct {
			DeletionTimestamp string `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	return json.Unmarshal(p.Raw, &m) == nil && m.Metadata.DeletionTimestamp != ""
}
