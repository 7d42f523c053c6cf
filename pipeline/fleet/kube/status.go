package kube

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// maxEventLookups bounds the event lists one poll reads.
const maxEventLookups = 8

// Status reads each Job named in ids and its pods and returns each
// index's state: a Job that is gone makes its indexes Gone. Each call
// asks the API server: wrap the engine in fleet.Throttle to space them.
func (e *Engine) Status(ctx context.Context, ids []string) (map[string]fleet.Status, error) {
	out := make(map[string]fleet.Status, len(ids))
	lookups := maxEventLookups
	for _, name := range jobNames(ids) {
		var job batchv1.Job
		err := e.batch.Get().Namespace(e.cfg.Namespace).Resource("jobs").Name(name).Do(ctx).Into(&job)
		if apierrors.IsNotFound(err) {
			for _, id := range ids {
				if n, _, _ := strings.Cut(id, "/"); n == name {
					out[id] = fleet.Status{ID: id, State: fleet.Gone}
				}
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the Job %s: %w%s", name, err, hint(err))
		}
		var pods corev1.PodList
		if err := e.core.Get().Namespace(e.cfg.Namespace).Resource("pods").Param("labelSelector", jobNameLabel+"="+name).Do(ctx).Into(&pods); err != nil {
			return nil, fmt.Errorf("listing the pods of Job %s: %w%s", name, err, hint(err))
		}
		byIndex := map[int][]corev1.Pod{}
		for _, p := range pods.Items {
			if i, err := strconv.Atoi(p.Labels[indexLabel]); err == nil {
				byIndex[i] = append(byIndex[i], p)
			}
		}
		for _, id := range ids {
			n, idx, _ := strings.Cut(id, "/")
			i, err := strconv.Atoi(idx)
			if n != name || err != nil {
				continue
			}
			ps := byIndex[i]
			sort.Slice(ps, func(a, b int) bool { return ps[a].CreationTimestamp.Before(&ps[b].CreationTimestamp) })
			st := IndexStatus(&job, i, ps, e.now(), e.schedule)
			st.ID = id
			if st.Reason == "" && st.State == fleet.Pending && len(ps) > 0 && lookups > 0 {
				lookups--
				st.Reason = e.lastEvent(ctx, ps[len(ps)-1].Name)
			}
			out[id] = st
		}
	}
	return out, nil
}

// lastEvent is the message of the latest warning event about pod, or "".
func (e *Engine) lastEvent(ctx context.Context, pod string) string {
	var evs corev1.EventList
	err := e.core.Get().Namespace(e.cfg.Namespace).Resource("events").
		Param("fieldSelector", "involvedObject.kind=Pod,involvedObject.name="+pod).Do(ctx).Into(&evs)
	if err != nil {
		return ""
	}
	var last *corev1.Event
	for i := range evs.Items {
		ev := &evs.Items[i]
		if ev.Type == corev1.EventTypeWarning && (last == nil || last.LastTimestamp.Before(&ev.LastTimestamp)) {
			last = ev
		}
	}
	if last == nil {
		return ""
	}
	return last.Reason + ": " + last.Message
}

// IndexStatus is the state of index i of job, from its pods (oldest
// first) at now: a pod unschedulable for longer than schedule counts as
// failed, with the scheduler's message.
func IndexStatus(job *batchv1.Job, i int, pods []corev1.Pod, now time.Time, schedule time.Duration) fleet.Status {
	st := fleet.Status{State: fleet.Pending}
	if len(pods) > 1 {
		st.Restarts = len(pods) - 1
	}
	failedCond := jobCondition(job, batchv1.JobFailed)
	switch {
	case inIndexes(job.Status.CompletedIndexes, i):
		st.State = fleet.Completed
	case job.Status.FailedIndexes != nil && inIndexes(*job.Status.FailedIndexes, i):
		st.State = fleet.Failed
	case failedCond != nil:
		st.State, st.Raw, st.Reason = fleet.Failed, failedCond.Reason, failedCond.Message
		if failedCond.Reason == batchv1.JobReasonDeadlineExceeded {
			st.State = fleet.Timeout
		}
	}
	if len(pods) == 0 {
		if st.State == fleet.Pending {
			st.Reason = "waiting for the Job controller to create the pod"
		}
		return st
	}
	p := &pods[len(pods)-1]
	st.Node = p.Spec.NodeName
	if p.Status.StartTime != nil {
		st.Start = p.Status.StartTime.Time
	}
	if code, end, ok := exitOf(p); ok {
		st.ExitCode, st.End = code, end
	}
	if st.State.Final() {
		if st.State == fleet.Failed && p.Status.Phase == corev1.PodFailed {
			st.State, st.Raw, st.Reason = failure(p)
		}
		return st
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		st.State = fleet.Completed
	case corev1.PodFailed:
		// Not in failedIndexes: the Job controller runs the index again.
		_, raw, reason := failure(p)
		st.State, st.Raw, st.Reason = fleet.Preempted, raw, "retried after: "+reason
	case corev1.PodRunning:
		st.State = fleet.Running
	default:
		st.Reason = pendingReason(p)
		if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			st.Raw = corev1.PodReasonUnschedulable
			if now.Sub(p.CreationTimestamp.Time) > schedule {
				st.State = fleet.Failed
				st.Reason = fmt.Sprintf("unschedulable for %v: %s", schedule, c.Message)
			}
		}
	}
	return st
}

// failure is the state, raw reason and reason of a failed pod: OOMKilled
// is OutOfMem, DeadlineExceeded Timeout, anything else Failed with the
// pod's reason (Evicted: the kubelet's message) or the containers'.
func failure(p *corev1.Pod) (fleet.State, string, string) {
	reason, msg := p.Status.Reason, p.Status.Message
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.Reason != "" && t.Reason != "Completed" && (reason == "" || t.Reason == "OOMKilled") {
			reason, msg = t.Reason, fmt.Sprintf("container %s exited %d", cs.Name, t.ExitCode)
			if t.Message != "" {
				msg += ": " + t.Message
			}
		}
	}
	text := reason
	if msg != "" {
		text += ": " + msg
	}
	if text == "" {
		text = "the pod failed"
	}
	switch reason {
	case "OOMKilled":
		return fleet.OutOfMem, reason, text
	case "DeadlineExceeded":
		return fleet.Timeout, reason, text
	}
	return fleet.Failed, reason, text
}

// pendingReason says why a pod waits: the scheduler's message, or a
// container's waiting reason (an image pull, a missing Secret).
func pendingReason(p *corev1.Pod) string {
	if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return strings.TrimSpace(c.Reason + ": " + c.Message)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return strings.TrimSpace(w.Reason + ": " + w.Message)
		}
	}
	return ""
}

// exitOf is the sign container's exit code and end time once it ended
// (the node container's when it has none).
func exitOf(p *corev1.Pod) (int, time.Time, bool) {
	var code int
	var end time.Time
	found := false
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && (cs.Name == SignContainer || !found) {
			code, end, found = int(t.ExitCode), t.FinishedAt.Time, true
		}
	}
	return code, end, found
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// jobFinished reports whether the Job completed or failed.
func jobFinished(j *batchv1.Job) bool {
	return jobCondition(j, batchv1.JobComplete) != nil || jobCondition(j, batchv1.JobFailed) != nil
}

// inIndexes reports whether i is in a Job's index list ("1,3-5,7").
func inIndexes(list string, i int) bool {
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		if a <= i && i <= b {
			return true
		}
	}
	return false
}
