package k8stest

import (
	"context"
	"fmt"
	"net/http"
	"os"
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
	stop()
	t.Logf("start %.1f s, start to teardown %.1f s", started.Seconds(), time.Since(began).Seconds())
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
