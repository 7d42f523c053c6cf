package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func request() fleet.Request {
	return fleet.Request{
		Name: "gpuattest-a100", Class: "a100", Count: 2, Dispatch: "20261127-015443-0a1b2c3d",
		Selectors: fleet.Selectors{GPUType: "a100", GPUs: 8, Distinct: true, Placement: Placement{Product: "NVIDIA-A100-SXM4-80GB", Labels: map[string]string{"pool": "gpu"}}},
		Env:       map[string]string{"GPUATTEST_FLEET_SIMULATE": "1"},
		TimeLimit: 90*time.Minute + 1, Requeue: true,
		Job: fleet.ImageJob{
			Command:     []string{"gpuattest", "fleet", "node", "--release", "reg/x@sha256:00", "a100"},
			SignCommand: []string{"gpuattest", "fleet", "sign", "a100"},
			Keys:        [][]byte{[]byte("key0"), []byte("key1")},
		},
	}
}

func TestBuild(t *testing.T) {
	m, err := Build(request(), Config{Namespace: "gpu", Image: "reg/img@sha256:ab", ImagePullSecrets: []string{"pull"}, ServiceAccount: "runner"})
	if err != nil {
		t.Fatal(err)
	}
	j := m.Job
	if j.Name != "gpuattest-a100-0a1b2c3d" || m.Secret.Name != j.Name || j.Namespace != "gpu" {
		t.Errorf("names: job %s/%s, secret %s", j.Namespace, j.Name, m.Secret.Name)
	}
	s := j.Spec
	if *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 2 || *s.Parallelism != 2 || *s.BackoffLimitPerIndex != maxRetries {
		t.Errorf("indexed: mode %v completions %d parallelism %d backoffLimitPerIndex %d", *s.CompletionMode, *s.Completions, *s.Parallelism, *s.BackoffLimitPerIndex)
	}
	if *s.ActiveDeadlineSeconds != 5401 {
		t.Errorf("activeDeadlineSeconds = %d, want 5401 (90m and 1ns, rounded up)", *s.ActiveDeadlineSeconds)
	}
	p := s.Template.Spec
	if diff := cmp.Diff(map[string]string{fleet.ProductLabel: "NVIDIA-A100-SXM4-80GB", "pool": "gpu"}, p.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	aa := p.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(aa) != 1 || aa[0].TopologyKey != "kubernetes.io/hostname" || aa[0].LabelSelector.MatchLabels[jobNameLabel] != j.Name {
		t.Errorf("anti-affinity = %+v", aa)
	}
	if *p.AutomountServiceAccountToken || p.RestartPolicy != corev1.RestartPolicyNever || p.ServiceAccountName != "runner" || p.ImagePullSecrets[0].Name != "pull" {
		t.Errorf("pod: token %v restart %s sa %q pull %v", *p.AutomountServiceAccountToken, p.RestartPolicy, p.ServiceAccountName, p.ImagePullSecrets)
	}
	node, sign := p.Containers[0], p.Containers[1]
	if node.Name != NodeContainer || sign.Name != SignContainer {
		t.Fatalf("containers %s, %s", node.Name, sign.Name)
	}
	if q := node.Resources.Limits[GPUResource]; q.Value() != 8 {
		t.Errorf("node container limits %v, want nvidia.com/gpu: 8", node.Resources.Limits)
	}
	if _, ok := sign.Resources.Limits[GPUResource]; ok {
		t.Errorf("the sign container asks for GPUs")
	}
	// The keys reach the sign container alone, read-only, 0400.
	for _, vm := range node.VolumeMounts {
		if vm.Name == "keys" || strings.HasPrefix(vm.MountPath, fleet.KeyMount) {
			t.Errorf("the node container mounts the keys: %+v", vm)
		}
	}
	if vm := sign.VolumeMounts[0]; vm.Name != "keys" || vm.MountPath != fleet.KeyMount || !vm.ReadOnly {
		t.Errorf("sign container's key mount = %+v", vm)
	}
	if v := p.Volumes[0].Secret; v.SecretName != j.Name || *v.DefaultMode != 0o400 {
		t.Errorf("key volume = %+v", v)
	}
	for _, ev := range node.Env {
		if strings.Contains(ev.Value, "key") || strings.Contains(ev.Value, fleet.KeyMount) {
			t.Errorf("node env names the key: %+v", ev)
		}
	}
	if diff := cmp.Diff(map[string][]byte{"0.key": []byte("key0"), "1.key": []byte("key1")}, m.Secret.Data); diff != "" {
		t.Errorf("secret data (-want +got):\n%s", diff)
	}
	// The digest is of the bytes submitted.
	sum := sha256.Sum256(m.JobJSON)
	if m.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("digest %s is not of the JSON", m.Digest)
	}
	var back batchv1.Job
	if err := json.Unmarshal(m.JobJSON, &back); err != nil || back.Kind != "Job" || back.APIVersion != "batch/v1" {
		t.Errorf("job JSON: %v, kind %q %q", err, back.Kind, back.APIVersion)
	}
	env := map[string]corev1.EnvVar{}
	for _, ev := range node.Env {
		env[ev.Name] = ev
	}
	if env[fleet.IndexEnv].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" || env["GPUATTEST_FLEET_SIMULATE"].Value != "1" || env[fleet.JobEnv].Value != j.Name {
		t.Errorf("env = %+v", node.Env)
	}
}

func TestBuildRefuses(t *testing.T) {
	for name, mod := range map[string]func(*fleet.Request){
		"no product":   func(r *fleet.Request) { r.Selectors.Placement = Placement{} },
		"keys missing": func(r *fleet.Request) { j := r.Job.(fleet.ImageJob); j.Keys = j.Keys[:1]; r.Job = j },
		"no command":   func(r *fleet.Request) { j := r.Job.(fleet.ImageJob); j.Command = nil; r.Job = j },
		"script job":   func(r *fleet.Request) { r.Job = fleet.ScriptJob{Script: "/s/job.sh"} },
		"count 0":      func(r *fleet.Request) { r.Count = 0 },
	} {
		r := request()
		mod(&r)
		if _, err := Build(r, Config{Image: "i"}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	r := request()
	r.Selectors.Distinct, r.Requeue, r.TimeLimit = false, false, 0
	m, err := Build(r, Config{Image: "i"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Job.Spec.Template.Spec.Affinity != nil || *m.Job.Spec.BackoffLimitPerIndex != 0 || m.Job.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("one node, no requeue, no limit: affinity %v, backoff %d, deadline %v", m.Job.Spec.Template.Spec.Affinity, *m.Job.Spec.BackoffLimitPerIndex, m.Job.Spec.ActiveDeadlineSeconds)
	}
}

func TestJobName(t *testing.T) {
	r := request()
	r.Name = "gpuattest-" + strings.Repeat("x", 63)
	if n := JobName(r); len(n)+len("-4095") > 63 || !strings.HasSuffix(n, "-0a1b2c3d") {
		t.Errorf("JobName = %q (%d chars)", n, len(n))
	}
}

func TestStripCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:secret@10.0.0.1:6443/base": "https://10.0.0.1:6443/base",
		"https://127.0.0.1:6443":                 "https://127.0.0.1:6443",
		"user:pw@host:6443":                      "host:6443",
	} {
		if got := StripCredentials(in); got != want {
			t.Errorf("StripCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIndexStatus(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	pending := func(age time.Duration, msg string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ts(age)}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
	}
	failed := func(reason, msg string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ts(time.Hour)}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason, Message: msg}}
	}
	running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ts(time.Minute)}, Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	msg := "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
	failedIdx := "1"
	tests := []struct {
		name string
		job  batchv1.Job
		pods []corev1.Pod
		want fleet.Status
	}{
		{name: "unschedulable, within the bound", pods: []corev1.Pod{pending(time.Minute, msg)},
			want: fleet.Status{State: fleet.Pending, Raw: "Unschedulable", Reason: "Unschedulable: " + msg}},
		{name: "unschedulable too long", pods: []corev1.Pod{pending(time.Hour, msg)},
			want: fleet.Status{State: fleet.Failed, Raw: "Unschedulable", Reason: "unschedulable for 10m0s: " + msg}},
		{name: "evicted, retried", pods: []corev1.Pod{failed("Evicted", "node low on memory")},
			want: fleet.Status{State: fleet.Preempted, Raw: "Evicted", Reason: "retried after: Evicted: node low on memory", Node: "n1"}},
		{name: "evicted then running", pods: []corev1.Pod{failed("Evicted", "x"), running},
			want: fleet.Status{State: fleet.Running, Node: "n2", Restarts: 1}},
		{name: "failed index", job: batchv1.Job{Status: batchv1.JobStatus{FailedIndexes: &failedIdx}}, pods: []corev1.Pod{failed("Evicted", "again")},
			want: fleet.Status{State: fleet.Failed, Raw: "Evicted", Reason: "Evicted: again", Node: "n1"}},
		{name: "completed", job: batchv1.Job{Status: batchv1.JobStatus{CompletedIndexes: "0-3"}}, pods: []corev1.Pod{running},
			want: fleet.Status{State: fleet.Completed, Node: "n2"}},
		{name: "deadline", job: batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}}}},
			want: fleet.Status{State: fleet.Timeout, Raw: "DeadlineExceeded", Reason: "Job was active longer than specified deadline"}},
		{name: "no pod yet", want: fleet.Status{State: fleet.Pending, Reason: "waiting for the Job controller to create the pod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := IndexStatus(&tt.job, 1, tt.pods, now, DefaultScheduleTimeout)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	oom := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: NodeContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}}
	if s, raw, _ := failure(&oom); s != fleet.OutOfMem || raw != "OOMKilled" {
		t.Errorf("OOMKilled pod: %s %s", s, raw)
	}
	if !inIndexes("1,3-5,7", 4) || inIndexes("1,3-5,7", 6) || inIndexes("", 0) {
		t.Error("inIndexes")
	}
}
