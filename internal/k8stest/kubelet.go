package k8stest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// pod makes a Pod of the apiserver's JSON, resolving the first
// container's environment as a kubelet would.
func (c *Cluster) pod(ctx context.Context, raw json.RawMessage) (Pod, error) {
	var a apiPod
	if err := json.Unmarshal(raw, &a); err != nil {
		return Pod{}, fmt.Errorf("decoding a pod: %w", err)
	}
	p := Pod{
		Name: a.Metadata.Name, Namespace: a.Metadata.Namespace, UID: a.Metadata.UID,
		Node: a.Spec.NodeName, Phase: a.Status.Phase, Reason: a.Status.Reason, Message: a.Status.Message,
		Labels: a.Metadata.Labels, Annotations: a.Metadata.Annotations,
		Conditions: a.Status.Conditions, Env: map[string]string{}, Raw: raw,
	}
	for _, v := range a.Spec.Volumes {
		var vol struct {
			Name   string
			Secret *struct{ SecretName string }
		}
		if err := json.Unmarshal(v, &vol); err != nil {
			return Pod{}, fmt.Errorf("pod %s: decoding a volume: %w", p.Name, err)
		}
		pv := Volume{Name: vol.Name, Raw: v}
		if vol.Secret != nil {
			pv.SecretName = vol.Secret.SecretName
		}
		p.Volumes = append(p.Volumes, pv)
	}
	if len(a.Spec.Containers) == 0 {
		return p, nil
	}
	ctr := a.Spec.Containers[0]
	p.Image, p.Command, p.Args, p.Mounts = ctr.Image, ctr.Command, ctr.Args, ctr.VolumeMounts
	for _, e := range ctr.Env {
		v, err := c.resolveEnv(ctx, a, e.Value, e.ValueFrom)
		if err != nil {
			return Pod{}, fmt.Errorf("pod %s: env %s: %w", p.Name, e.Name, err)
		}
		p.Env[e.Name] = v
	}
	return p, nil
}

var mapField = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']*)'\]$`)

func (c *Cluster) resolveEnv(ctx context.Context, a apiPod, value string, from *struct {
	FieldRef        *struct{ FieldPath string }
	SecretKeyRef    *struct{ Name, Key string }
	ConfigMapKeyRef *struct{ Name, Key string }
}) (string, error) {
	switch {
	case from == nil:
		return value, nil
	case from.FieldRef != nil:
		f := from.FieldRef.FieldPath
		if m := mapField.FindStringSubmatch(f); m != nil {
			if m[1] == "labels" {
				return a.Metadata.Labels[m[2]], nil
			}
			return a.Metadata.Annotations[m[2]], nil
		}
		switch f {
		case "metadata.name":
			return a.Metadata.Name, nil
		case "metadata.namespace":
			return a.Metadata.Namespace, nil
		case "metadata.uid":
			return a.Metadata.UID, nil
		case "spec.nodeName":
			return a.Spec.NodeName, nil
		case "spec.serviceAccountName":
			return a.Spec.ServiceAccountName, nil
		}
		return "", fmt.Errorf("fieldRef %q is not resolved by k8stest", f)
	case from.SecretKeyRef != nil:
		data, err := c.SecretData(ctx, a.Metadata.Namespace, from.SecretKeyRef.Name)
		if err != nil {
			return "", err
		}
		return string(data[from.SecretKeyRef.Key]), nil
	case from.ConfigMapKeyRef != nil:
		var cm struct{ Data map[string]string }
		err := c.Admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+a.Metadata.Namespace+"/configmaps/"+from.ConfigMapKeyRef.Name, nil, &cm)
		return cm.Data[from.ConfigMapKeyRef.Key], err
	}
	return "", fmt.Errorf("valueFrom of a kind k8stest does not resolve")
}

// SecretData returns the data of Secret ns/name, decoded.
func (c *Cluster) SecretData(ctx context.Context, ns, name string) (map[string][]byte, error) {
	var s struct{ Data map[string]string }
	if err := c.Admin.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets/"+name, nil, &s); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for k, v := range s.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s: key %s: %w", ns, name, k, err)
		}
		out[k] = b
	}
	return out, nil
}

// MountSecrets writes the secret volumes of p's first container under
// root as a kubelet would mount them (each key a file, mode 0400), and
// returns each such mount's path in the container mapped to its directory
// under root. Other volumes are not written.
func (c *Cluster) MountSecrets(ctx context.Context, p Pod, root string) (map[string]string, error) {
	secrets := map[string]string{}
	for _, v := range p.Volumes {
		if v.SecretName != "" {
			secrets[v.Name] = v.SecretName
		}
	}
	out := map[string]string{}
	for i, m := range p.Mounts {
		name, ok := secrets[m.Name]
		if !ok {
			continue
		}
		data, err := c.SecretData(ctx, p.Namespace, name)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(root, fmt.Sprintf("mount%d-%s", i, m.Name))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		for k, v := range data {
			if strings.ContainsAny(k, "/\x00") || k == "." || k == ".." {
				return nil, fmt.Errorf("secret %s: key %q is not a file name", name, k)
			}
			if err := os.WriteFile(filepath.Join(dir, k), v, 0o400); err != nil {
				return nil, err
			}
		}
		out[m.MountPath] = dir
	}
	return out, nil
}

// FinishPod ends a Running pod as its kubelet would when its containers
// exit with exitCode: phase Succeeded for 0, else Failed, each container
// terminated with that code.
func (c *Cluster) FinishPod(ctx context.Context, ns, name string, exitCode int) error {
	phase, reason := "Succeeded", "Completed"
	if exitCode != 0 {
		phase, reason = "Failed", "Error"
	}
	return c.endPod(ctx, ns, name, phase, "", "", exitCode, reason, nil)
}

// FailPod ends a pod as Failed with reason and message, as a kubelet does
// for an eviction (reason "Evicted"): its containers terminated with 137,
// and, for Evicted, the DisruptionTarget condition a kubelet adds (so a
// Job's podFailurePolicy can tell a disruption). The Job controller sees
// a failed index.
func (c *Cluster) FailPod(ctx context.Context, ns, name, reason, message string) error {
	var extra []map[string]any
	if reason == "Evicted" {
		extra = append(extra, map[string]any{"type": "DisruptionTarget", "status": "True",
			"reason": "TerminationByKubelet", "message": message, "lastTransitionTime": now()})
	}
	return c.endPod(ctx, ns, name, "Failed", reason, message, 137, "Error", extra)
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

func (c *Cluster) endPod(ctx context.Context, ns, name, phase, reason, message string, exitCode int, ctrReason string, extra []map[string]any) error {
	var a struct {
		Spec struct {
			Containers []struct{ Name, Image string }
		}
		Status struct {
			Phase      string
			StartTime  string
			Conditions []map[string]any
		}
	}
	path := "/api/v1/namespaces/" + ns + "/pods/" + name
	if err := c.Admin.Do(ctx, http.MethodGet, path, nil, &a); err != nil {
		return err
	}
	if a.Status.Phase == "Succeeded" || a.Status.Phase == "Failed" {
		return fmt.Errorf("pod %s/%s has already ended (%s)", ns, name, a.Status.Phase)
	}
	t := now()
	started := a.Status.StartTime
	if started == "" {
		started = t
	}
	var statuses []map[string]any
	for _, ctr := range a.Spec.Containers {
		statuses = append(statuses, map[string]any{
			"name": ctr.Name, "image": ctr.Image, "imageID": "", "ready": false, "restartCount": 0, "started": false,
			"state": map[string]any{"terminated": map[string]any{
				"exitCode": exitCode, "reason": ctrReason, "startedAt": started, "finishedAt": t}},
		})
	}
	var conds []map[string]any
	for _, cond := range a.Status.Conditions {
		switch cond["type"] {
		case "Ready", "ContainersReady":
			cond["status"], cond["reason"], cond["lastTransitionTime"] = "False", "PodCompleted", t
		}
		conds = append(conds, cond)
	}
	conds = append(conds, extra...)
	status := map[string]any{"phase": phase, "containerStatuses": statuses, "conditions": conds}
	if reason != "" {
		status["reason"], status["message"] = reason, message
	}
	if err := c.Admin.Do(ctx, http.MethodPatch, path+"/status", map[string]any{"status": status}, nil); err != nil {
		return fmt.Errorf("ending pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// Event is one core/v1 Event.
type Event struct {
	Type, Reason, Message string
	Count                 int
	// Kind and Name are the involved object's.
	Kind, Name string
}

// Events returns the events of ns about the object kind/name (Pod,
// Job; all objects when kind and name are ""): the scheduler's
// FailedScheduling with "Insufficient nvidia.com/gpu", the Job
// controller's SuccessfulCreate, ...
func (c *Cluster) Events(ctx context.Context, ns, kind, name string) ([]Event, error) {
	var sel []string
	if kind != "" {
		sel = append(sel, "involvedObject.kind="+kind)
	}
	if name != "" {
		sel = append(sel, "involvedObject.name="+name)
	}
	path := "/api/v1/namespaces/" + ns + "/events"
	if len(sel) > 0 {
		path += "?fieldSelector=" + url.QueryEscape(strings.Join(sel, ","))
	}
	var list struct {
		Items []struct {
			Type, Reason, Message string
			Count                 int
			InvolvedObject        struct{ Kind, Name string }
		}
	}
	if err := c.Admin.Do(ctx, http.MethodGet, path, nil, &list); err != nil {
		return nil, err
	}
	var out []Event
	for _, e := range list.Items {
		out = append(out, Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name})
	}
	return out, nil
}
