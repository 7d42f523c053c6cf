package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

// squeueJob is the part of one squeue --json job the fleet reads. Fields
// whose JSON shape changed between Slurm releases are kept raw.
type squeueJob struct {
	JobID       json.RawMessage `json:"job_id"`
	JobState    json.RawMessage `json:"job_state"`
	StateReason string          `json:"state_reason"`
	Nodes       string          `json:"nodes"`
	BatchHost   string          `json:"batch_host"`
	StartTime   json.RawMessage `json:"start_time"`
	EndTime     json.RawMessage `json:"end_time"`
	RestartCnt  json.RawMessage `json:"restart_cnt"`
	ExitCode    json.RawMessage `json:"exit_code"`
	// An array job's tasks: a running or ended task is a record of its
	// own (array_job_id, array_task_id); the pending ones share one
	// record whose array_task_string lists them ("0-3,7").
	ArrayJobID      json.RawMessage `json:"array_job_id"`
	ArrayTaskID     json.RawMessage `json:"array_task_id"`
	ArrayTaskString string          `json:"array_task_string"`
}

// ParseSqueue decodes `squeue --json` output into job states, whichever
// data parser version wrote it; errors squeue reported in the document
// are returned as an error.
func ParseSqueue(data []byte) ([]fleet.Status, error) {
	var doc struct {
		Jobs   []squeueJob `json:"jobs"`
		Errors []struct {
			Error       string `json:"error"`
			Description string `json:"description"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decoding squeue --json: %w", err)
	}
	if len(doc.Errors) > 0 {
		msgs := make([]string, len(doc.Errors))
		for i, e := range doc.Errors {
			msgs[i] = strings.TrimSpace(e.Error + " " + e.Description)
		}
		return nil, fmt.Errorf("squeue --json reported: %s", strings.Join(msgs, "; "))
	}
	out := make([]fleet.Status, 0, len(doc.Jobs))
	for i, j := range doc.Jobs {
		id, ok := number(j.JobID)
		if !ok {
			return nil, fmt.Errorf("squeue --json: jobs[%d].job_id: expected a number, got %s", i, truncate(string(j.JobID), 60))
		}
		raw := state(j.JobState)
		s := fleet.Status{
			ID:     strconv.FormatInt(id, 10),
			Raw:    raw,
			State:  mapState(raw),
			Reason: j.StateReason,
			Node:   j.BatchHost,
		}
		if s.Reason == "None" {
			s.Reason = ""
		}
		if s.Node == "" {
			s.Node = j.Nodes
		}
		if s.State == fleet.Pending {
			// A pending job that ran before (requeued) still names its
			// last node; it runs nowhere now.
			s.Node = ""
		}
		if v, ok := number(j.StartTime); ok && v > 0 && s.State != fleet.Pending {
			s.Start = time.Unix(v, 0)
		}
		if v, ok := number(j.EndTime); ok && v > 0 && s.State.Final() {
			s.End = time.Unix(v, 0)
		}
		if v, ok := number(j.RestartCnt); ok {
			s.Restarts = int(v)
		}
		if v, ok := exitCode(j.ExitCode); ok {
			s.ExitCode = v
		}
		if string(s.State) == raw {
			s.Raw = ""
		}
		if arr, ok := number(j.ArrayJobID); ok && arr > 0 {
			if task, ok := number(j.ArrayTaskID); ok && task >= 0 && task < maxArrayTask {
				s.ID = fmt.Sprintf("%d_%d", arr, task)
			} else {
				for _, task := range expandTasks(j.ArrayTaskString) {
					t := s
					t.ID = fmt.Sprintf("%d_%d", arr, task)
					out = append(out, t)
				}
				continue
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// maxArrayTask bounds the array tasks read from one record (Slurm's
// MaxArraySize is at most 4000001).
const maxArrayTask = 4000001

// expandTasks expands an array_task_string ("0-3,7", "0-15%4") into task
// indexes; what does not parse is skipped.
func expandTasks(s string) []int64 {
	s, _, _ = strings.Cut(s, "%")
	var out []int64
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		if err != nil || a < 0 {
			continue
		}
		b := a
		if isRange {
			step := int64(1)
			if h, st, ok := strings.Cut(hi, ":"); ok {
				hi = h
				if step, err = strconv.ParseInt(st, 10, 64); err != nil || step < 1 {
					continue
				}
			}
			if b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64); err != nil || b < a || b-a > maxArrayTask {
				continue
			}
			for t := a; t <= b; t += step {
				out = append(out, t)
			}
			continue
		}
		out = append(out, b)
	}
	return out
}

// mapState maps Slurm's base job state to a fleet state; flags (a second
// word such as REQUEUED) were dropped by state.
func mapState(s string) fleet.State {
	switch s {
	case "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "CONFIGURING":
		return fleet.Pending
	case "RUNNING", "SIGNALING", "STAGE_OUT":
		return fleet.Running
	case "COMPLETING":
		return fleet.Completing
	case "COMPLETED":
		return fleet.Completed
	case "CANCELLED":
		return fleet.Cancelled
	case "TIMEOUT", "DEADLINE":
		return fleet.Timeout
	case "NODE_FAIL", "BOOT_FAIL":
		return fleet.NodeFail
	case "PREEMPTED":
		return fleet.Preempted
	case "OUT_OF_MEMORY":
		return fleet.OutOfMem
	}
	return fleet.Failed
}

// state reads job_state: a string (22.05) or a list of base state and
// flags (23.02 and later).
func state(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.ToUpper(s)
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
		// The base state comes first; COMPLETING may come as a flag.
		for _, f := range list[1:] {
			if f == "COMPLETING" && list[0] != "COMPLETED" {
				return f
			}
		}
		return strings.ToUpper(list[0])
	}
	return "UNKNOWN"
}

// number reads an integer written plainly (22.05) or as
// {"set":true,"infinite":false,"number":N} (23.02 and later); an unset
// or infinite one is not ok.
func number(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		v, err := n.Int64()
		return v, err == nil
	}
	var obj struct {
		Set      *bool       `json:"set"`
		Infinite bool        `json:"infinite"`
		Number   json.Number `json:"number"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Infinite || (obj.Set != nil && !*obj.Set) {
		return 0, false
	}
	v, err := obj.Number.Int64()
	return v, err == nil
}

// exitCode reads exit_code: a wait status (22.05: 768 for exit 3, 9
// for SIGKILL), or {"status": [...], "return_code": N, "signal": ...}
// (23.02 and later). A signal is reported as 128 plus its number, as a
// shell does.
func exitCode(raw json.RawMessage) (int, bool) {
	if v, ok := number(raw); ok {
		if sig := v & 0x7f; sig != 0 {
			return 128 + int(sig), true
		}
		return int(v>>8) & 0xff, true
	}
	var obj struct {
		ReturnCode json.RawMessage `json:"return_code"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		if v, ok := number(obj.ReturnCode); ok {
			return int(v), true
		}
	}
	return 0, false
}
