package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and names the engine sets.
const (
	// DispatchLabel carries the dispatch's ID on the Jobs, Secrets and
	// pods.
	DispatchLabel = "gpuattest.dev/dispatch"
	// ClassLabel carries the class.
	ClassLabel = "gpuattest.dev/class"
	// GPUResource is the device plugin's resource.
	GPUResource = "nvidia.com/gpu"
	// NodeContainer runs the GPU steps; SignContainer signs.
	NodeContainer = "node"
	SignContainer = "sign"
	// indexAnnotation and indexLabel carry a pod's completion index.
	indexAnnotation = "batch.kubernetes.io/job-completion-index"
	indexLabel      = "batch.kubernetes.io/job-completion-index"
	jobNameLabel    = "batch.kubernetes.io/job-name"
	hostnameKey     = "kubernetes.io/hostname"
)

// Bounds of a Job.
const (
	// maxRetries is the backoffLimitPerIndex of a class that may be
	// requeued: how many times an evicted or preempted index runs again.
	maxRetries = 3
	// ttlAfterFinished keeps a finished Job (and its pods' status) this
	// long for fleet collect, then the cluster deletes it.
	ttlAfterFinished = 24 * 60 * 60
)

// Config is what the Job of a class needs besides the Request.
type Config struct {
	// Namespace is where the Job and Secret go.
	Namespace string
	// Image is the pod image; ImagePullSecrets pull it.
	Image            string
	ImagePullSecrets []string
	// ServiceAccount is the pods' service account (its token is never
	// mounted).
	ServiceAccount string
}

// Manifests are a class's Job and the Secret of its job keys, and the
// JSON of the Job as submitted.
type Manifests struct {
	Job    *batchv1.Job
	Secret *corev1.Secret
	// JobJSON is the Job as submitted; Digest its "sha256:<hex>".
	JobJSON []byte
	Digest  string
}

// JobName is the name of req's Job: the request's name (cut to 40
// characters) and the last 8 characters of the dispatch's ID, lowercase,
// so that two dispatches never share a Job and a pod's host name
// (NAME-INDEX) fits in 63 characters.
func JobName(req fleet.Request) string {
	base := strings.ToLower(req.Name)
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	id := strings.ToLower(req.Dispatch)
	if len(id) > 8 {
		id = id[len(id)-8:]
	}
	if id == "" {
		return base
	}
	return base + "-" + strings.Trim(id, "-")
}

// Placement is the Kubernetes engine's own node selection of a class
// (fleet.Selectors.Placement): the nodes' labels.
type Placement struct {
	// Product is the value of the nodes' fleet.ProductLabel.
	Product string
	// Labels are further labels the nodes must carry.
	Labels map[string]string
}

// ArchLabel is the node label the kubelet sets to the node's
// architecture as Go spells it: a class's arch selects by it.
const ArchLabel = "kubernetes.io/arch"

// Build returns the Job and Secret of req, whose Job is a
// fleet.ImageJob.
func Build(req fleet.Request, cfg Config) (*Manifests, error) {
	ij, err := check(req, cfg)
	if err != nil {
		return nil, err
	}
	name := JobName(req)
	labels := map[string]string{DispatchLabel: req.Dispatch, ClassLabel: req.Class}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cfg.Namespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	for i, k := range ij.Keys {
		secret.Data[strconv.Itoa(i)+".key"] = k
	}
	count := int32(req.Count)
	retries := int32(0)
	if req.Requeue {
		retries = maxRetries
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cfg.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode:          ptr(batchv1.IndexedCompletion),
			Completions:             &count,
			Parallelism:             &count,
			BackoffLimitPerIndex:    &retries,
			TTLSecondsAfterFinished: ptr(int32(ttlAfterFinished)),
			PodFailurePolicy:        failurePolicy(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       podSpec(req, ij, cfg, name),
			},
		},
	}
	if req.TimeLimit > 0 {
		job.Spec.ActiveDeadlineSeconds = ptr(int64((req.TimeLimit + 999999999) / 1e9))
	}
	b, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return &Manifests{Job: job, Secret: secret, JobJSON: b, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// check refuses a request the engine cannot submit, and returns its job.
func check(req fleet.Request, cfg Config) (fleet.ImageJob, error) {
	ij, isImage := req.Job.(fleet.ImageJob)
	p, _ := req.Selectors.Placement.(Placement)
	var err error
	switch {
	case req.Count < 1:
		err = fmt.Errorf("submitting class %s: count %d, expected at least 1", req.Class, req.Count)
	case p.Product == "" || req.Selectors.GPUs < 1:
		err = fmt.Errorf("submitting class %s: no GPU product or count\nhint: a class names its product (nvidia.com/gpu.product) and gpus", req.Class)
	case !isImage:
		err = fmt.Errorf("submitting class %s: a job of type %T, expected a fleet.ImageJob\nhint: Kubernetes runs the fleet's image, the dispatch staged through a registry", req.Class, req.Job)
	case len(ij.Command) == 0 || len(ij.SignCommand) == 0:
		err = fmt.Errorf("submitting class %s: no node or sign command", req.Class)
	case len(ij.Keys) != req.Count:
		err = fmt.Errorf("submitting class %s: %d job keys for %d jobs", req.Class, len(ij.Keys), req.Count)
	case req.Dispatch == "":
		err = fmt.Errorf("submitting class %s: no dispatch ID", req.Class)
	case cfg.Image == "":
		err = fmt.Errorf("submitting class %s: no image\nhint: the fleet file's kubernetes.image names the pod image", req.Class)
	}
	return ij, err
}

// failurePolicy fails an index at once when its sign container exits 1
// (the node signed a bundle that says it failed) or 2 (bad input):
// running it again changes nothing. Any other failure (an eviction, a
// preemption, a lost node) counts against backoffLimitPerIndex, and a
// disruption does not count at all.
func failurePolicy() *batchv1.PodFailurePolicy {
	sign := SignContainer
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: &sign, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1, 2}}},
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
	}}
}

// podSpec is the pods' spec: the node container with the GPUs and the
// report volume, the sign container with the keys and the report read
// only; no service-account token, no service links.
func podSpec(req fleet.Request, ij fleet.ImageJob, cfg Config, name string) corev1.PodSpec {
	p, _ := req.Selectors.Placement.(Placement)
	selector := map[string]string{fleet.ProductLabel: p.Product}
	for k, v := range p.Labels {
		selector[k] = v
	}
	if req.Selectors.Arch != "" {
		selector[ArchLabel] = req.Selectors.Arch
	}
	env := jobEnv(req, name)
	gpus := resource.MustParse(strconv.Itoa(req.Selectors.GPUs))
	spec := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr(false),
		EnableServiceLinks:           ptr(false),
		ServiceAccountName:           cfg.ServiceAccount,
		NodeSelector:                 selector,
		Tolerations:                  []corev1.Toleration{{Key: GPUResource, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{
			{
				Name: NodeContainer, Image: cfg.Image, Command: ij.Command, Env: env,
				Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: gpus}},
				VolumeMounts: []corev1.VolumeMount{{Name: "report", MountPath: fleet.ReportMount}},
			},
			{
				Name: SignContainer, Image: cfg.Image, Command: ij.SignCommand, Env: env,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "keys", MountPath: fleet.KeyMount, ReadOnly: true},
					{Name: "report", MountPath: fleet.ReportMount, ReadOnly: true},
				},
			},
		},
		Volumes: []corev1.Volume{
			{Name: "keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: ptr(int32(0o400))}}},
			{Name: "report", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	for _, s := range cfg.ImagePullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if req.Selectors.Distinct {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{jobNameLabel: name}},
				TopologyKey:   hostnameKey,
			}},
		}}
	}
	return spec
}

// jobEnv is both containers' environment: req.Env (sorted), the index,
// the node's name and the Job's name.
func jobEnv(req fleet.Request, name string) []corev1.EnvVar {
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var env []corev1.EnvVar
	for _, k := range keys {
		env = append(env, corev1.EnvVar{Name: k, Value: req.Env[k]})
	}
	return append(env,
		corev1.EnvVar{Name: fleet.IndexEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + indexAnnotation + "']"}}},
		corev1.EnvVar{Name: fleet.NodeEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		corev1.EnvVar{Name: fleet.JobEnv, Value: name},
	)
}

func ptr[T any](v T) *T { return &v }
