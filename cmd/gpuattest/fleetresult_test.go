package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// TestFleetResultWording: the words and exit codes the CLI gives each
// outcome of run.Fleet and run.CollectFleet. The fleet conformance suite
// (pipeline/fleet/fleettest) drives the outcomes themselves on every
// engine through the library; this holds what a user reads of them, which
// the per-engine CLI tests checked before the suite replaced them.
func TestFleetResultWording(t *testing.T) {
	state := &coordinate.State{Jobs: []coordinate.JobState{{Name: "a100-0"}, {Name: "h100-0"}}}
	failed := &dispatch.Report{Verified: false}
	tests := []struct {
		name     string
		res      *run.FleetResult
		err      error
		wantCode int
		wantErr  string
		wantOut  []string
	}{
		{
			name:     "timeout",
			res:      &run.FleetResult{Dir: "run", State: state},
			err:      fmt.Errorf("waiting: %w", coordinate.ErrTimeout),
			wantCode: exitFailed,
			wantErr:  "the dispatch did not finish in time after 8s: its 2 job(s) were cancelled",
		},
		{
			name:     "interrupted",
			res:      &run.FleetResult{Dir: "run", State: state},
			err:      context.Canceled,
			wantCode: exitInterrupted,
			wantErr:  "interrupted: the dispatch's 2 job(s) were cancelled; run is not collected",
		},
		{
			name:     "bad input",
			err:      fmt.Errorf("fleet.yaml: %w", run.ErrFleetInput),
			wantCode: exitUsage,
			wantErr:  "fleet.yaml",
		},
		{
			name: "missing job",
			res: &run.FleetResult{Dir: "run", State: state, Collected: &coordinate.Collected{
				Report:  failed,
				Missing: []string{"job a100-0 (slurm 7 on node1): no node bundle; CANCELLED"},
			}},
			wantCode: exitFailed,
			wantOut:  []string{"missing: job a100-0 (slurm 7 on node1): no node bundle; CANCELLED", "fleet dispatch: FAILED", "run directory: run"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			r := &fleetRender{out: &out, err: &errw}
			err := r.result(tt.res, tt.err, 8*time.Second)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != tt.wantCode {
				t.Fatalf("result: %v, want exit %d", err, tt.wantCode)
			}
			if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("result: %q, want it to say %q", err, tt.wantErr)
			}
			all := out.String() + errw.String()
			for _, w := range tt.wantOut {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
		})
	}
}
