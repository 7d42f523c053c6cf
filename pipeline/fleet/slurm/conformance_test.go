package slurm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
)

// TestConformance runs the fleet's scheduler suite against a local
// Slurm cluster (internal/slurmtest).
func TestConformance(t *testing.T) {
	c, e, shared := start(t)
	request := func(t *testing.T, class string, count, exit int, d time.Duration) fleet.Request {
		p := filepath.Join(shared, class+".sh")
		body := fmt.Sprintf("#!/bin/sh\nsleep %d\nexit %d\n", int(d.Seconds()), exit)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return fleet.Request{Name: "gpuattest-" + class, Class: class, Count: count, Job: fleet.ScriptJob{Script: p, LogDir: shared},
			Selectors: fleet.Selectors{GPUType: "h100", GPUs: 1}, TimeLimit: 15 * time.Minute}
	}
	fleettest.Run(t, fleettest.Harness{Scheduler: e, Request: request, Unknown: "999999", Timeout: 90 * time.Second})
	if t.Failed() {
		t.Log(c.Logs())
	}
}
