package slurm_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/slurm"
)

func TestParseSqueue(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	tests := []struct {
		name string
		file string
		want []fleet.Status
	}{
		{
			// A completed and a running job as 22.05.8 printed them, and
			// two adapted: a requeued job pending again, which names its
			// last node and start, and one that exited with 3 (a wait
			// status of 768).
			name: "22.05", file: "testdata/squeue-22.05.json",
			want: []fleet.Status{
				{ID: "1", State: fleet.Completed, Node: "node1", Start: at(1795732763), End: at(1795732768)},
				{ID: "2", State: fleet.Running, Node: "node1", Start: at(1795732768)},
				{ID: "3", State: fleet.Pending, Reason: "BeginTime", Restarts: 1},
				{ID: "4", State: fleet.Failed, Reason: "NonZeroExitCode", Node: "node1", Start: at(1700000000), End: at(1700000060), ExitCode: 3},
			},
		},
		{
			// 23.11's shapes: state lists, {"set","number"} times and an
			// exit_code object; a requeued job pending again names no node.
			name: "23.11", file: "testdata/squeue-23.11.json",
			want: []fleet.Status{
				{ID: "7", State: fleet.Running, Node: "gpu-a-17", Start: at(1700000000), Restarts: 2},
				{ID: "8", State: fleet.Pending, Reason: "BeginTime", Restarts: 1, ExitCode: 0},
				{ID: "9", State: fleet.Completed, Node: "gpu-b-2", Start: at(1700000000), End: at(1700000100)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := slurm.ParseSqueue(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseSqueue (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseSqueueArrays: pending array tasks share a record listing them;
// a running task has its own.
func TestParseSqueueArrays(t *testing.T) {
	in := `{"jobs":[
	 {"job_id":10,"array_job_id":10,"array_task_id":null,"array_task_string":"1-3,7,9-13:2%2","job_state":"PENDING","state_reason":"Resources"},
	 {"job_id":11,"array_job_id":10,"array_task_id":0,"array_task_string":"","job_state":"RUNNING","batch_host":"n1"}]}`
	got, err := slurm.ParseSqueue([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID+":"+string(s.State))
	}
	want := []string{"10_1:PENDING", "10_2:PENDING", "10_3:PENDING", "10_7:PENDING", "10_9:PENDING", "10_11:PENDING", "10_13:PENDING", "10_0:RUNNING"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("ParseSqueue (-want +got):\n%s", diff)
	}
}

func TestParseSqueueErrors(t *testing.T) {
	tests := []struct{ name, in, wantErr string }{
		{"not json", "squeue: error: Invalid job id", "decoding squeue --json"},
		{"reported", `{"errors":[{"error":"Unable to query jobs","description":"slurmctld down"}],"jobs":[]}`, "Unable to query jobs slurmctld down"},
		{"bad id", `{"jobs":[{"job_id":"x"}]}`, "jobs[0].job_id: expected a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := slurm.ParseSqueue([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestFormatTime(t *testing.T) {
	for d, want := range map[time.Duration]string{
		90 * time.Second:           "0-00:02:00",
		time.Hour:                  "0-01:00:00",
		26*time.Hour + time.Minute: "1-02:01:00",
	} {
		if got := slurm.FormatTime(d); got != want {
			t.Errorf("FormatTime(%v) = %s, want %s", d, got, want)
		}
	}
}
