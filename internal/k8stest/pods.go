package k8stest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Pod is what a test needs of a pod: where it runs, its phase, and the
// environment and volumes its first container would get.
type Pod struct {
	Name, Namespace, UID string
	// Node is spec.nodeName ("" until scheduled).
	Node string
	// Phase is status.phase: Pending, Running, Succeeded, Failed.
	Phase string
	// Reason and Message are status.reason and status.message (Evicted).
	Reason, Message string
	Labels          map[string]string
	Annotations     map[string]string
	// Env is the first container's environment as a kubelet would
	// resolve it: value, or valueFrom a fieldRef (metadata.name,
	// metadata.namespace, metadata.uid, metadata.labels['k'],
	// metadata.annotations['k'], spec.nodeName, spec.serviceAccountName),
	// a secretKeyRef or a configMapKeyRef (read with the admin token).
	// JOB_COMPLETION_INDEX is a fieldRef to the Job's completion index
	// annotation.
	Env map[string]string
	// Image and Command/Args are the first container's.
	Image         string
	Command, Args []string
	// Volumes are the pod's volumes (secret ones with SecretName set),
	// Mounts the first container's volumeMounts.
	Volumes []Volume
	Mounts  []Mount
	// Conditions are status.conditions (PodScheduled False with the
	// scheduler's reason and message while unschedulable).
	Conditions []Condition
	// Raw is the whole pod as the apiserver returned it.
	Raw json.RawMessage
}

// Volume is one of a pod's volumes.
type Volume struct {
	Name string
	// SecretName is set for a secret volume.
	SecretName string
	// Raw is the volume's JSON, for other kinds.
	Raw json.RawMessage
}

// Mount is one of a container's volumeMounts.
type Mount struct {
	Name, MountPath, SubPath string
	ReadOnly                 bool
}

// Condition is one pod condition.
type Condition struct {
	Type, Status, Reason, Message string
}

// Condition returns the pod's condition of type typ, if it has one.
func (p Pod) Condition(typ string) (Condition, bool) {
	for _, c := range p.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// apiPod is the part of a v1.Pod that Pod is made from.
type apiPod struct {
	Metadata struct {
		Name, Namespace, UID string
		Labels, Annotations  map[string]string
	}
	Spec struct {
		NodeName           string
		ServiceAccountName string
		Containers         []struct {
			Name, Image   string
			Command, Args []string
			Env           []struct {
				Name, Value string
				ValueFrom   *struct {
					FieldRef        *struct{ FieldPath string }
					SecretKeyRef    *struct{ Name, Key string }
					ConfigMapKeyRef *struct{ Name, Key string }
				}
			}
			VolumeMounts []Mount
		}
		Volumes []json.RawMessage
	}
	Status struct {
		Phase, Reason, Message string
		Conditions             []Condition
	}
}

// ListPods lists the pods of ns matching the label selector (all when "";
// job-name=NAME for a Job's), resolved as Pod says.
func (c *Cluster) ListPods(ctx context.Context, ns, selector string) ([]Pod, error) {
	var list struct{ Items []json.RawMessage }
	path := "/api/v1/namespaces/" + ns + "/pods"
	if selector != "" {
		path += "?labelSelector=" + url.QueryEscape(selector)
	}
	if err := c.Admin.Do(ctx, http.MethodGet, path, nil, &list); err != nil {
		return nil, err
	}
	pods := make([]Pod, 0, len(list.Items))
	for _, raw := range list.Items {
		p, err := c.pod(ctx, raw)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// GetPod returns one pod, resolved as Pod says.
func (c *Cluster) GetPod(ctx context.Context, ns, name string) (Pod, error) {
	var raw json.RawMessage
	if err := c.Admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods/"+name, nil, &raw); err != nil {
		return Pod{}, err
	}
	return c.pod(ctx, raw)
}

// WaitPods lists the pods of ns matching selector until done returns
// true for them (every 100 ms, backing off to 1 s), and returns that list; or
// ctx's error with the last list's names and phases.
func (c *Cluster) WaitPods(ctx context.Context, ns, selector string, done func([]Pod) bool) ([]Pod, error) {
	var pods []Pod
	err := poll(ctx, fmt.Sprintf("pods %q in %s", selector, ns), nil, func(ctx context.Context) error {
		var err error
		if pods, err = c.ListPods(ctx, ns, selector); err != nil {
			return err
		}
		if done(pods) {
			return nil
		}
		var s []string
		for _, p := range pods {
			s = append(s, p.Name+"@"+p.Node+":"+p.Phase)
		}
		return fmt.Errorf("pods %v", s)
	})
	return pods, err
}

// Running is a WaitPods condition: at least n pods, each Running.
func Running(n int) func([]Pod) bool {
	return func(pods []Pod) bool {
		return countPhase(pods, "Running") >= n && countPhase(pods, "Running") == len(pods)
	}
}

func countPhase(pods []Pod, phase string) int {
	n := 0
	for _, p := range pods {
		if p.Phase == phase {
			n++
		}
	}
	return n
}
