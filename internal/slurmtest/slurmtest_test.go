package slurmtest_test

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/slurmtest"
)

// TestClusterRunsTypedGPUJobs submits one job per GPU type and checks that
// each ran on the node with CUDA_VISIBLE_DEVICES set for its device.
func TestClusterRunsTypedGPUJobs(t *testing.T) {
	c := slurmtest.Start(t, nil)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(out, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES\" > \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, g := range []struct{ gres, constraint, dev string }{{"gpu:a100:1", "sm_80", "0"}, {"gpu:h100:1", "sm_90", "1"}} {
		file := filepath.Join(out, strings.ReplaceAll(g.gres, ":", "-"))
		cmd := c.Command(t.Context(), "sbatch", "--parsable", "--gres="+g.gres, "--constraint="+g.constraint,
			"--output=/dev/null", script, file)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sbatch %s: %v: %s\n%s", g.gres, err, b, c.Logs())
		}
		want[file] = c.Node + " " + g.dev
	}
	for file, w := range want {
		var got []byte
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got, _ = os.ReadFile(file); len(got) > 0 {
				break
			}
		}
		if strings.TrimSpace(string(got)) != w {
			t.Errorf("%s: job wrote %q, want %q\n%s", filepath.Base(file), got, w, c.Logs())
		}
	}
}

// TestUser makes (or finds) a user in a group, twice: the second call
// finds what the first made.
func TestUser(t *testing.T) {
	for range 2 {
		u := slurmtest.User(t, "gpuattest-alice", "gpuattest-proj")
		g, err := user.LookupGroup("gpuattest-proj")
		if err != nil {
			t.Fatal(err)
		}
		gids, err := u.GroupIds()
		if err != nil || !slices.Contains(gids, g.Gid) || u.Username != "gpuattest-alice" {
			t.Fatalf("user %+v in groups %v (%v), want gpuattest-alice in gpuattest-proj (%s)", u, gids, err, g.Gid)
		}
	}
}
