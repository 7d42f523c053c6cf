package k8stest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-80GB"
)

func TestMain(m *testing.M) {
	os.Exit(Main(m, GPUNode("gpu-h100-0", h100, 8), GPUNode("gpu-a100-0", a100, 8)))
}

// TestBuildScriptVersions: .ci/k8s builds the versions this package looks
// for, into the directory CacheDir names.
func TestBuildScriptVersions(t *testing.T) {
	data, err := os.ReadFile("../../.ci/k8s")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"K8S_VERSION":  KubernetesVersion,
		"KWOK_VERSION": KwokVersion,
		"ETCD_VERSION": EtcdVersion,
		"RECIPE":       strconv.Itoa(recipe),
	}
	for name, v := range want {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)`).FindSubmatch(data)
		if m == nil || string(m[1]) != v {
			t.Errorf(".ci/k8s: %s = %q, want %q (internal/k8stest/bin.go)", name, m, v)
		}
	}
	if !strings.Contains(string(data), `dir="$cache/k8s-$K8S_VERSION-kwok-$KWOK_VERSION-etcd-$ETCD_VERSION-r$RECIPE"`) {
		t.Errorf(".ci/k8s no longer names its directory as CacheDir does (%s)", CacheDir())
	}
}

// job is an Indexed Job of completions pods, each asking for gpus
// nvidia.com/gpu on a node labelled product.
func job(name, product string, completions, gpus int) map[string]any {
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"completionMode": "Indexed", "completions": completions, "parallelism": completions,
			"backoffLimitPerIndex": 1, "maxFailedIndexes": 0,
			"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"nodeSelector":  map[string]string{GPUProductLabel: product},
				"containers": []any{map[string]any{
					"name": "node", "image": "registry.invalid/gpuattest:test",
					"command":   []string{"gpuattest", "fleet", "node"},
					"env":       []any{map[string]any{"name": "GPUATTEST_RELEASE", "value": "registry.invalid/r@sha256:00"}},
					"resources": map[string]any{"limits": map[string]any{GPUResource: strconv.Itoa(gpus)}},
				}},
			}},
		},
	}
}

type jobStatus struct {
	Status struct {
		Succeeded, Failed int
		FailedIndexes     string
		Conditions        []struct{ Type, Status, Reason, Message string }
	}
}

// waitJob waits until the Job has condition typ True.
func waitJob(ctx context.Context, t *testing.T, cl *Client, ns, name, typ string) jobStatus {
	t.Helper()
	var js jobStatus
	err := poll(ctx, "job "+name+" "+typ, nil, func(ctx context.Context) error {
		if err := cl.Do(ctx, http.MethodGet, "/apis/batch/v1/namespaces/"+ns+"/jobs/"+name, nil, &js); err != nil {
			return err
		}
		for _, c := range js.Status.Conditions {
			if c.Type == typ && c.Status == "True" {
				return nil
			}
		}
		return fmt.Errorf("status %+v", js.Status)
	})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// deleteJob deletes a Job and its pods (foreground propagation: the
// garbage collector deletes the pods, kwok's pod-delete stage ends them).
func deleteJob(t *testing.T, c *Cluster, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		body := map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
		if err := c.Admin.Do(ctx, http.MethodDelete, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs/"+name, body, nil); err != nil {
			t.Errorf("deleting job %s: %v", name, err)
			return
		}
		if _, err := c.WaitPods(ctx, c.Namespace, "job-name="+name, func(p []Pod) bool { return len(p) == 0 }); err != nil {
			t.Errorf("the pods of job %s were not deleted: %v", name, err)
		}
	})
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestServeAndStop: a cluster of its own starts with a node and stops:
// every component has exited and its directory is gone.
func TestServeAndStop(t *testing.T) {
	Require(t)
	began := time.Now()
	c, stop, err := Serve("", GPUNode("solo", h100, 1))
	if err != nil {
		t.Fatal(err)
	}
	procs := slices.Clone(c.cp.procs)
	started := time.Since(began)
	var rss []string
	total := 0
	for _, p := range procs {
		kb := vmRSS(p.cmd.Process.Pid)
		total += kb
		rss = append(rss, fmt.Sprintf("%s %d MB", p.name, kb>>10))
	}
	stop()
	t.Logf("start %.1f s, start to teardown %.1f s; resident after start: %d MB (%s)",
		started.Seconds(), time.Since(began).Seconds(), total>>10, strings.Join(rss, ", "))
	var names []string
	for _, p := range procs {
		names = append(names, p.name)
		if !p.exited() || syscall.Kill(p.cmd.Process.Pid, 0) == nil {
			t.Errorf("%s still runs after stop", p.name)
		}
	}
	if want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}; !slices.Equal(names, want) {
		t.Errorf("components %v, want %v", names, want)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("%s remains after stop: %v", c.Dir, err)
	}
}

// vmRSS is the resident set of pid in KiB (0 when unknown).
func vmRSS(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}

// TestStart: Start gives a cluster whose kubeconfig reaches the
// apiserver (its CA and token), which reports the version built, and
// whose namespace exists.
func TestStart(t *testing.T) {
	c := Start(t)
	ctx := testContext(t)
	data, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string
				CA     []byte `json:"certificate-authority-data"`
			}
		}
		Users    []struct{ User struct{ Token string } }
		Contexts []struct{ Context struct{ Namespace string } }
	}
	if err := json.Unmarshal(data, &kc); err != nil || len(kc.Clusters) != 1 || len(kc.Users) != 1 || len(kc.Contexts) != 1 {
		t.Fatalf("kubeconfig %s: %v\n%s", c.Kubeconfig, err, data)
	}
	cl, err := newClient(kc.Clusters[0].Cluster.Server, kc.Clusters[0].Cluster.CA, "admin", kc.Users[0].User.Token, c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ GitVersion string }
	if err := cl.Do(ctx, http.MethodGet, "/version", nil, &v); err != nil || v.GitVersion != KubernetesVersion {
		t.Errorf("GET /version with the kubeconfig's credentials: %+v, %v; want %s", v, err, KubernetesVersion)
	}
	if ns := kc.Contexts[0].Context.Namespace; ns != c.Namespace {
		t.Errorf("kubeconfig namespace %q, want %q", ns, c.Namespace)
	}
	if err := cl.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+c.Namespace, nil, nil); err != nil {
		t.Error(err)
	}
	bad, _ := newClient(c.Server, c.CA, "nobody", "not-a-token", "")
	if err := bad.Do(ctx, http.MethodGet, "/api/v1/namespaces", nil, nil); !IsStatus(err, http.StatusUnauthorized) {
		t.Errorf("an unknown token: %v, want 401", err)
	}
}

// TestServeReportsAComponentThatExits: when a component exits during
// the start, Serve says which, with the tail of its log, stops the rest
// and removes its directory. Runs everywhere: the binaries are scripts.
func TestServeReportsAComponentThatExits(t *testing.T) {
	bin := t.TempDir()
	for _, b := range binaries {
		script := "#!/bin/sh\necho \"" + b + ": cannot start: flag provided but not defined\" >&2\nexit 3\n"
		if err := os.WriteFile(filepath.Join(bin, b), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range stageFiles {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(bin, "kwok-stages", s)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "kwok-stages", s), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GPUATTEST_K8S_BIN", bin)
	dir := filepath.Join(t.TempDir(), "cluster")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err := Serve(dir)
	if err == nil {
		t.Fatal("Serve started a cluster whose etcd exits")
	}
	for _, want := range []string{"waiting for etcd's /health: etcd exited (exit status 3)", "etcd: cannot start: flag provided but not defined"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "etcd.log")); err != nil {
		t.Errorf("the log of a directory the caller gave is kept: %v", err)
	}
}

// TestBinSaysHowToBuild: without the binaries, Bin names what is missing
// and how to build it.
func TestBinSaysHowToBuild(t *testing.T) {
	t.Setenv("GPUATTEST_K8S_BIN", t.TempDir())
	_, err := Bin()
	if err == nil || !strings.Contains(err.Error(), "no executable kube-apiserver") || !strings.Contains(err.Error(), "bash .ci/k8s") {
		t.Errorf("Bin() error %v, want it to name kube-apiserver and .ci/k8s", err)
	}
}
