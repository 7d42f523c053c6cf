package k8stest

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestIndexedJob: an Indexed Job with a nodeSelector on the GPU product
// and nvidia.com/gpu limits, submitted as JSON by the restricted user, is
// scheduled onto the matching node; each pod gets its
// JOB_COMPLETION_INDEX and the Secret mounted; FinishPod completes the
// pods and the Job completes.
func TestIndexedJob(t *testing.T) {
	c := Shared(t)
	ctx := testContext(t)
	secret := map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "job-key"},
		"data":     map[string]string{"key": base64.StdEncoding.EncodeToString([]byte("secret key bytes"))}}
	if err := c.Restricted.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+c.Namespace+"/secrets", secret, nil); err != nil {
		t.Fatal(err)
	}
	j := job("indexed", h100, 2, 4)
	spec := j["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["volumes"] = []any{map[string]any{"name": "key", "secret": map[string]any{"secretName": "job-key"}}}
	spec["containers"].([]any)[0].(map[string]any)["volumeMounts"] = []any{
		map[string]any{"name": "key", "mountPath": "/var/run/gpuattest/key", "readOnly": true}}
	if err := c.Restricted.Do(ctx, http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs", j, nil); err != nil {
		t.Fatal(err)
	}
	deleteJob(t, c, "indexed")
	pods, err := c.WaitPods(ctx, c.Namespace, "job-name=indexed", Running(2))
	if err != nil {
		t.Fatal(err)
	}
	var indexes []string
	for _, p := range pods {
		if p.Node != "gpu-h100-0" {
			t.Errorf("pod %s runs on %q, want the H100 node gpu-h100-0", p.Name, p.Node)
		}
		idx := p.Env["JOB_COMPLETION_INDEX"]
		if idx != p.Labels["batch.kubernetes.io/job-completion-index"] {
			t.Errorf("pod %s: JOB_COMPLETION_INDEX %q, its label says %q", p.Name, idx, p.Labels["batch.kubernetes.io/job-completion-index"])
		}
		indexes = append(indexes, idx)
		if p.Env["GPUATTEST_RELEASE"] != "registry.invalid/r@sha256:00" {
			t.Errorf("pod %s: env %v", p.Name, p.Env)
		}
		mounts, err := c.MountSecrets(ctx, p, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(mounts["/var/run/gpuattest/key"], "key"))
		if err != nil || string(got) != "secret key bytes" {
			t.Errorf("pod %s: mounted key %q, %v", p.Name, got, err)
		}
	}
	slices.Sort(indexes)
	if !slices.Equal(indexes, []string{"0", "1"}) {
		t.Errorf("completion indexes %v, want [0 1]", indexes)
	}
	for _, p := range pods {
		if err := c.FinishPod(ctx, c.Namespace, p.Name, 0); err != nil {
			t.Fatal(err)
		}
	}
	js := waitJob(ctx, t, c.Restricted, c.Namespace, "indexed", "Complete")
	if js.Status.Succeeded != 2 {
		t.Errorf("job succeeded %d, want 2", js.Status.Succeeded)
	}
}

// TestUnschedulable: a Job asking more GPUs than any node has stays
// Pending, with the scheduler's reason on the pod and in an event.
func TestUnschedulable(t *testing.T) {
	c := Shared(t)
	ctx := testContext(t)
	if err := c.Restricted.Do(ctx, http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs", job("toobig", h100, 1, 9), nil); err != nil {
		t.Fatal(err)
	}
	deleteJob(t, c, "toobig")
	pods, err := c.WaitPods(ctx, c.Namespace, "job-name=toobig", func(pods []Pod) bool {
		if len(pods) != 1 {
			return false
		}
		cond, ok := pods[0].Condition("PodScheduled")
		return ok && cond.Status == "False"
	})
	if err != nil {
		t.Fatal(err)
	}
	p := pods[0]
	cond, _ := p.Condition("PodScheduled")
	if p.Phase != "Pending" || p.Node != "" || cond.Reason != "Unschedulable" || !strings.Contains(cond.Message, "Insufficient nvidia.com/gpu") {
		t.Errorf("pod %s: phase %s node %q PodScheduled %+v, want Pending, unscheduled, Unschedulable: Insufficient nvidia.com/gpu", p.Name, p.Phase, p.Node, cond)
	}
	events, err := c.Events(ctx, c.Namespace, "Pod", p.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e Event) bool {
		return e.Reason == "FailedScheduling" && strings.Contains(e.Message, "Insufficient nvidia.com/gpu")
	}) {
		t.Errorf("no FailedScheduling event naming Insufficient nvidia.com/gpu: %+v", events)
	}
	t.Logf("scheduler: %s", cond.Message)
}

// TestEvictedIndexRetriedAlone: FailPod with reason Evicted on one index
// of a Job with backoffLimitPerIndex makes the Job controller create a
// new pod for that index only.
func TestEvictedIndexRetriedAlone(t *testing.T) {
	c := Shared(t)
	ctx := testContext(t)
	if err := c.Restricted.Do(ctx, http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs", job("evicted", a100, 2, 2), nil); err != nil {
		t.Fatal(err)
	}
	deleteJob(t, c, "evicted")
	first, err := c.WaitPods(ctx, c.Namespace, "job-name=evicted", Running(2))
	if err != nil {
		t.Fatal(err)
	}
	byIndex := map[string]Pod{}
	for _, p := range first {
		byIndex[p.Env["JOB_COMPLETION_INDEX"]] = p
	}
	victim, kept := byIndex["1"], byIndex["0"]
	if err := c.FailPod(ctx, c.Namespace, victim.Name, "Evicted", "The node was low on resource: memory."); err != nil {
		t.Fatal(err)
	}
	pods, err := c.WaitPods(ctx, c.Namespace, "job-name=evicted", func(pods []Pod) bool {
		return len(pods) == 3 && countPhase(pods, "Running") == 2
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		idx := p.Env["JOB_COMPLETION_INDEX"]
		switch {
		case p.UID == victim.UID:
			if p.Phase != "Failed" || p.Reason != "Evicted" {
				t.Errorf("evicted pod %s: phase %s reason %s", p.Name, p.Phase, p.Reason)
			}
		case p.UID == kept.UID:
			if p.Phase != "Running" {
				t.Errorf("index 0's pod %s is %s, want it left Running", p.Name, p.Phase)
			}
		case idx != "1":
			t.Errorf("new pod %s is for index %s, want only index 1 retried", p.Name, idx)
		}
		if p.Phase == "Running" {
			if err := c.FinishPod(ctx, c.Namespace, p.Name, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	js := waitJob(ctx, t, c.Restricted, c.Namespace, "evicted", "Complete")
	if js.Status.Failed != 1 || js.Status.Succeeded != 2 {
		t.Errorf("job failed %d succeeded %d, want 1 and 2", js.Status.Failed, js.Status.Succeeded)
	}
}

// TestRestrictedUser: the restricted user can create a Job and a Secret
// in its namespace, and cannot list nodes, create a ClusterRole, or
// create a Secret in another namespace.
func TestRestrictedUser(t *testing.T) {
	c := Shared(t)
	ctx := testContext(t)
	r := c.Restricted
	secret := func(ns string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "k", "namespace": ns}, "stringData": map[string]string{"k": "v"}}
	}
	if err := r.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+c.Namespace+"/secrets", secret(c.Namespace), nil); err != nil {
		t.Errorf("creating a Secret in its namespace: %v", err)
	}
	if err := r.Do(ctx, http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs", job("allowed", "NO-SUCH-GPU", 1, 1), nil); err != nil {
		t.Errorf("creating a Job in its namespace: %v", err)
	}
	deleteJob(t, c, "allowed")
	clusterRole := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "escalate"}, "rules": []any{}}
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"list nodes", http.MethodGet, "/api/v1/nodes", nil},
		{"create a ClusterRole", http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterroles", clusterRole},
		{"create a Secret in default", http.MethodPost, "/api/v1/namespaces/default/secrets", secret("default")},
		{"list Jobs in all namespaces", http.MethodGet, "/apis/batch/v1/jobs", nil},
	} {
		err := r.Do(ctx, tc.method, tc.path, tc.body, nil)
		if !IsStatus(err, http.StatusForbidden) {
			t.Errorf("%s as %s: %v, want 403 Forbidden", tc.name, r.User, err)
		}
	}
	// The admin can do what the restricted user cannot.
	if err := c.Admin.Do(ctx, http.MethodGet, "/api/v1/nodes", nil, nil); err != nil {
		t.Errorf("listing nodes as admin: %v", err)
	}
	if data, err := os.ReadFile(r.Kubeconfig); err != nil || !strings.Contains(string(data), strconv.Quote(c.Namespace)) {
		t.Errorf("the restricted kubeconfig does not name its namespace: %v", err)
	}
}
