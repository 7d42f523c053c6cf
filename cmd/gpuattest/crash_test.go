package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// selfAsGpuattest links this test binary as "gpuattest" (testscript.Main
// then runs the CLI) and returns its path.
func selfAsGpuattest(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "gpuattest")
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// waitFor polls cond for up to 60 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for gpuattest to start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// attemptWritten reports whether run.json in dir records at least n
// attempts (run or resume invocations).
func attemptWritten(dir string, n int) bool {
	rec, err := engine.ReadRecord(dir)
	return err == nil && len(rec.Attempts) >= n
}

// crashPipeline is 10 steps: two chains of four joined by two final steps.
func crashPipeline() string {
	var b strings.Builder
	b.WriteString("apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: crash\nsteps:\n")
	step := func(id string, needs ...string) {
		fmt.Fprintf(&b, "  - id: %s\n    run: sleep 0.3; mkdir -p out; echo %s >> ran.log; echo %s > out/%s\n    outputs: [out/%s]\n", id, id, id, id, id)
		if len(needs) > 0 {
			fmt.Fprintf(&b, "    needs: [%s]\n", strings.Join(needs, ", "))
		}
	}
	step("a1")
	step("a2", "a1")
	step("a3", "a2")
	step("a4", "a3")
	step("b1")
	step("b2", "b1")
	step("b3", "b2")
	step("b4", "b3")
	step("join", "a4", "b4")
	step("final", "join")
	return b.String()
}

func ranCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "ran.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, l := range strings.Fields(string(data)) {
		counts[l]++
	}
	return counts
}

// TestSIGKILLAndResume kills gpuattest run with SIGKILL at several points;
// after each kill run.json must parse, and resume must finish with every
// step passed, never re-running a step that was recorded as passed.
func TestSIGKILLAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real processes; takes a few seconds")
	}
	bin := selfAsGpuattest(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(crashPipeline()), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "r")
	type frozen struct {
		step  string
		count int
	}
	var mustStay []frozen
	delays := []time.Duration{400 * time.Millisecond, 250 * time.Millisecond, 330 * time.Millisecond, 180 * time.Millisecond, 270 * time.Millisecond}
	kills := 0
	for i, d := range delays {
		args := []string{"run", "p.yaml", "--no-cache", "--jobs", "2", "-q"}
		if i == 0 {
			args = append(args, "--out", "r")
		} else {
			args = append(args, "--resume", "r")
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Start-up time varies (race builds are slow to start): count the
		// delay from the moment this attempt has written its run.json.
		waitFor(t, func() bool { return attemptWritten(runDir, i+1) })
		time.Sleep(d)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if err == nil {
			// Finished before the kill: nothing left to interrupt.
			break
		}
		kills++
		raw, rerr := os.ReadFile(filepath.Join(runDir, "run.json"))
		if rerr != nil {
			t.Fatalf("kill %d after %v: run.json unreadable: %v (stderr: %s)", i, d, rerr, stderr.String())
		}
		if !json.Valid(raw) {
			t.Fatalf("kill %d after %v: run.json is not valid JSON:\n%s", i, d, raw)
		}
		rec, rerr := engine.ReadRecord(runDir)
		if rerr != nil {
			t.Fatalf("kill %d: %v", i, rerr)
		}
		counts := ranCounts(t, dir)
		for _, s := range rec.Steps {
			if s.State == runtypes.Passed {
				mustStay = append(mustStay, frozen{s.ID, counts[s.ID]})
			}
		}
	}
	if kills < 3 {
		t.Fatalf("only %d kills landed mid-run; the test needs slower steps", kills)
	}
	cmd := exec.Command(bin, "run", "p.yaml", "--resume", "r", "--no-cache", "-o", "json", "-q")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("final resume: %v\n%s", err, out)
	}
	rec, err := engine.ReadRecord(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != runtypes.Passed {
		t.Fatalf("final state %s: %s", rec.State, rec.Reason)
	}
	for _, s := range rec.Steps {
		if s.State != runtypes.Passed {
			t.Errorf("step %s: %s", s.ID, s.State)
		}
	}
	final := ranCounts(t, dir)
	for _, f := range mustStay {
		if final[f.step] != f.count {
			t.Errorf("step %s was recorded passed (ran %d times) but ran again (now %d)", f.step, f.count, final[f.step])
		}
	}
	t.Logf("%d kills; runs per step: %v; %d attempts recorded", kills, final, len(rec.Attempts))
}

// TestSIGTERMInterrupts sends SIGTERM to gpuattest run: the step's process
// group dies, run.json says interrupted, and the exit status is 1.
func TestSIGTERMInterrupts(t *testing.T) {
	bin := selfAsGpuattest(t)
	dir := t.TempDir()
	p := "apiVersion: gpuattest.dev/v1\nkind: Pipeline\nname: term\nsteps:\n" +
		"  - id: long\n    run: (sleep 2; touch survived) & sleep 30\n" +
		"  - id: after\n    needs: [long]\n    run: touch after\n"
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "p.yaml", "--out", "r", "-q")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "r", "steps", "long", "stdout.log"))
		return err == nil
	})
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %v to stop after SIGTERM", d)
	}
	rec, err := engine.ReadRecord(filepath.Join(dir, "r"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != runtypes.Interrupted {
		t.Errorf("run state %s, want interrupted", rec.State)
	}
	time.Sleep(2500 * time.Millisecond)
	for _, f := range []string{"survived", "after"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s exists: the run went on after SIGTERM", f)
		}
	}
}
