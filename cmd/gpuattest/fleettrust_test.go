//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/slurmtest"
)

// Issue 30: a fleet that trusts nothing on the shared directory. Each
// test runs against the real Slurm of internal/slurmtest.

// block submits a job that holds every GPU of gres type typ for five
// minutes and waits until it runs; it returns the job's ID.
func block(t *testing.T, typ string) string {
	t.Helper()
	b, err := exec.Command("sbatch", "--parsable", "--gres=gpu:"+typ+":1", "--output=/dev/null", "--wrap", "sleep 300").Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(b))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if jobState(id) == "RUNNING" {
			return id
		}
	}
	t.Fatalf("the %s blocker %s never ran", typ, id)
	return ""
}

// jobState is Slurm's state of job id ("" once it is no longer listed).
func jobState(id string) string {
	b, _ := exec.Command("squeue", "-h", "-j", id, "-o", "%T").Output()
	return strings.TrimSpace(string(b))
}

// scontrol runs scontrol with args.
func scontrol(t *testing.T, args ...string) {
	t.Helper()
	if b, err := exec.Command("scontrol", args...).CombinedOutput(); err != nil {
		t.Fatalf("scontrol %s: %v: %s", strings.Join(args, " "), err, b)
	}
}

// runJobAlone releases the held job id and waits (two minutes at most)
// until it has ended.
func runJobAlone(t *testing.T, id string) {
	t.Helper()
	scontrol(t, "release", id)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		switch jobState(id) {
		case "PENDING", "CONFIGURING", "RUNNING", "COMPLETING":
			continue
		}
		return
	}
	t.Fatalf("job %s did not end within two minutes", id)
}

// dispatchDir is the one dispatch directory under dir/shared.
func dispatchDir(t *testing.T, dir string) string {
	t.Helper()
	ds, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "dispatch.intoto.jsonl"))
	if len(ds) != 1 {
		t.Fatalf("dispatch directories: %v", ds)
	}
	return filepath.Dir(ds[0])
}

// jobLog is what job's Slurm log in the dispatch directory d says.
func jobLog(t *testing.T, d, job string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(d, "logs", job+"-*.log"))
	var b strings.Builder
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		b.Write(data)
	}
	return b.String()
}

// resignFile signs the statement of the bundle file path again with a
// new key: the same statement (the same digest) in other bytes.
func resignFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sign.UnverifiedStatement(bytes.TrimSpace(b))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "stranger"), nil)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := sign.LoadPrivateKey(kp.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := s.Sign(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return append(nb, '\n')
}

// fourClasses is the fleet of TestFleetNodeChecksWhatItRuns: a job that
// runs as it should, one that finds another job's run directory in its
// place, one that finds a stand-in binary, one that finds the dispatch
// re-signed by another key.
const fourClasses = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: slurm
partition: gpu
sharedDir: %SHARED%
classes:
  - {name: a100, gres: "gpu:a100:1", constraint: sm_80, targets: [sm_80], timeLimit: 5m}
  - {name: resumed, gres: "gpu:a100:1", constraint: sm_80, targets: [sm_80], timeLimit: 5m}
  - {name: standin, gres: "gpu:h100:1", constraint: sm_90, targets: [sm_90], timeLimit: 5m}
  - {name: redispatch, gres: "gpu:h100:1", constraint: sm_90, targets: [sm_90], timeLimit: 5m}
`

// TestFleetNodeChecksWhatItRuns (items 1 and 2): the job script copies
// the staged binary into a private directory on the node and checks its
// digest there, so a stand-in binary on the shared directory never runs;
// the node refuses a dispatch file whose digest is not the one the job
// script pins, even one holding the same statement signed by another
// key; and a requeued node resumes only a run directory bound to its own
// job, not another job's run (whose steps passed) copied into its place.
// The jobs run one at a time (held, then released), after a100-0 ran as
// it should.
func TestFleetNodeChecksWhatItRuns(t *testing.T) {
	dir := fleetSetup(t)
	write(t, filepath.Join(dir, "fleet.yaml"), strings.ReplaceAll(fourClasses, "%SHARED%", filepath.Join(dir, "shared")))
	blockers := []string{block(t, "a100"), block(t, "h100")}
	if code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q", "--detach"); code != 0 {
		t.Fatalf("run --fleet --detach: exit %d\n%s", code, out)
	}
	ids := map[string]string{}
	for _, job := range []string{"a100-0", "resumed-0", "standin-0", "redispatch-0"} {
		ids[job] = jobID(t, dir, job)
		scontrol(t, "hold", ids[job])
	}
	if err := exec.Command("scancel", blockers...).Run(); err != nil {
		t.Fatal(err)
	}
	d := dispatchDir(t, dir)
	script, err := os.ReadFile(filepath.Join(d, "job.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^bin_sha256=[0-9a-f]{64}$`).Match(script) || !regexp.MustCompile(`(?m)^dispatch_digest=sha256:[0-9a-f]{64}$`).Match(script) {
		t.Errorf("job.sh pins no binary and dispatch digest:\n%s", script)
	}

	runJobAlone(t, ids["a100-0"])
	if _, err := os.Stat(filepath.Join(d, "jobs", "a100-0", "node.intoto.jsonl")); err != nil {
		t.Fatalf("a100-0 signed no bundle: %v\n%s", err, jobLog(t, d, "a100-0"))
	}

	// Another job's run directory, its steps passed, and its binding.
	for _, name := range []string{"run", "run.binding"} {
		src, dst := filepath.Join(d, "jobs", "a100-0", name), filepath.Join(d, "jobs", "resumed-0", name)
		if fi, err := os.Stat(src); err == nil && fi.IsDir() {
			err = os.CopyFS(dst, os.DirFS(src))
		} else if err == nil {
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = os.WriteFile(dst, b, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	runJobAlone(t, ids["resumed-0"])

	// A stand-in binary on the shared directory: it would leave a mark.
	bin := filepath.Join(d, "bin", "gpuattest")
	real, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "stand-in-ran")
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho ran > "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runJobAlone(t, ids["standin-0"])
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stand-in binary ran (%v)", err)
	}
	if log := jobLog(t, d, "standin-0"); !strings.Contains(log, "refusing to run "+bin+": it is sha256:") {
		t.Errorf("standin-0's log does not say it refused the binary:\n%s", log)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, real, 0o755); err != nil {
		t.Fatal(err)
	}

	// The same dispatch statement, signed by another key.
	dispatchFile := filepath.Join(d, "dispatch.intoto.jsonl")
	own, err := os.ReadFile(dispatchFile)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dispatchFile, string(resignFile(t, dispatchFile)))
	runJobAlone(t, ids["redispatch-0"])
	if log := jobLog(t, d, "redispatch-0"); !strings.Contains(log, "refusing to run: the dispatch file "+dispatchFile+" is sha256:") ||
		!strings.Contains(log, ", the job script names sha256:") {
		t.Errorf("redispatch-0's log does not say it refused the dispatch file:\n%s", log)
	}
	write(t, dispatchFile, string(own))

	code, out := fleetCLI(t, dir, "fleet", "collect", "run", "--timeout", "2m")
	if code != exitFailed {
		t.Errorf("collect: exit %d, want %d\n%s", code, exitFailed, out)
	}
	for _, want := range []string{
		"missing: job standin-0 (slurm " + ids["standin-0"] + " on node1): no node bundle; FAILED",
		"missing: job redispatch-0 (slurm " + ids["redispatch-0"] + " on node1): no node bundle; FAILED",
		"FAIL job resumed-0 (class resumed): failed: on node node1: refusing to resume the run in " + filepath.Join(d, "jobs", "resumed-0", "run") + ": its binding is not this job's",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("collect output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^  a100-0 +a100 +[0-9]+ +node1 +passed`).MatchString(out) {
		t.Errorf("a100-0 did not pass:\n%s", out)
	}
}

// TestFleetTwoUsers (item 2) plays the attack of the red team with two
// real users of one group: the owner, alice, dispatches; mallory, who can
// read no key, swaps the dispatch directory for one of her own once the
// shared directory lets her (group-writable without the sticky bit),
// with the real binary, dispatch and work tree, keys/ a link to alice's
// and a planted run record. Staging refuses such a shared directory; the
// sticky bit keeps mallory from renaming alice's directory; and when the
// bit goes after staging, alice's nodes refuse mallory's directory, run
// nothing and sign nothing, and collect says why.
func TestFleetTwoUsers(t *testing.T) {
	dir := fleetSetup(t)
	alice := slurmtest.User(t, "gpuattest-alice", "gpuattest-proj")
	mallory := slurmtest.User(t, "gpuattest-mallory", "gpuattest-proj")
	g, err := user.LookupGroup("gpuattest-proj")
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	// alice's files, readable by all; the shared directory root's, the
	// group's to write.
	bin := filepath.Join(dir, "bin", "gpuattest")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Dir(bin)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(dir, "shared")
	for _, p := range []string{"proj", "proj/p.yaml", "fleet.yaml", "rel.key", "rel.pub"} {
		chown(t, filepath.Join(dir, p), alice)
	}
	if err := os.Chown(dir, uidOf(alice), gidOf(alice)); err != nil { // alice's working directory (run/ goes here)
		t.Fatal(err)
	}
	if err := os.Chown(shared, 0, gid); err != nil {
		t.Fatal(err)
	}
	as := func(u *user.User, args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SLURM_CONF=" + os.Getenv("SLURM_CONF"), "GPUATTEST_FLEET_POLL=300ms", "GPUATTEST_PASSWORD="}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uidOf(u)), Gid: uint32(gidOf(u)), Groups: []uint32{uint32(gid)}}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	run := []string{bin, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--simulate-gpus", "-q"}

	// 2775, as group project directories often are: refused at staging.
	if err := os.Chmod(shared, 0o775|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	code, out := as(alice, append(run, "--out", "refused")...)
	if code != exitFailed || !strings.Contains(out, "refusing to stage in sharedDir "+shared+": others could replace this path: "+shared+": it is writable by group without the sticky bit") ||
		!strings.Contains(out, "hint: ") || !strings.Contains(out, "chmod +t "+shared) {
		t.Fatalf("run --fleet with a 2775 sharedDir: exit %d, want %d refusing it with a hint\n%s", code, exitFailed, out)
	}
	if staged, _ := os.ReadDir(shared); len(staged) != 0 {
		t.Errorf("staging left %d entries in the refused sharedDir", len(staged))
	}
	if _, err := os.Stat(filepath.Join(dir, "refused", "build")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the build ran before the sharedDir was refused (%v)", err)
	}

	// 3775: staged; the sticky bit keeps mallory from renaming it.
	if err := os.Chmod(shared, 0o775|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	blockers := []string{block(t, "a100"), block(t, "h100")}
	if code, out := as(alice, append(run, "--out", "run", "--detach")...); code != 0 {
		t.Fatalf("run --fleet --detach as alice: exit %d\n%s", code, out)
	}
	d := dispatchDir(t, dir)
	id := filepath.Base(d)
	if code, out := as(mallory, "mv", d, d+".old"); code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("mallory renamed alice's dispatch directory in a sticky sharedDir: exit %d\n%s", code, out)
	}

	// The sticky bit goes; mallory swaps the directory.
	if err := os.Chmod(shared, 0o775|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	plant := fmt.Sprintf(`set -e
cd %s
mv %[2]s %[2]s.old
mkdir -m 0777 %[2]s %[2]s/logs %[2]s/jobs %[2]s/jobs/a100-0 %[2]s/jobs/h100-0
mkdir %[2]s/jobs/a100-0/run
cp -r %[2]s.old/bin %[2]s.old/work %[2]s.old/job.sh %[2]s.old/dispatch.intoto.jsonl %[2]s/
ln -s ../%[2]s.old/keys %[2]s/keys
echo '{"planted": "a GPU step that passed"}' > %[2]s/jobs/a100-0/run/run.json
`, shared, id)
	if code, out := as(mallory, "sh", "-c", plant); code != 0 {
		t.Fatalf("mallory's swap: exit %d\n%s", code, out)
	}
	if err := exec.Command("scancel", blockers...).Run(); err != nil {
		t.Fatal(err)
	}
	code, out = as(alice, bin, "fleet", "collect", "run", "--timeout", "2m")
	if code != exitFailed {
		t.Errorf("collect as alice: exit %d, want %d\n%s", code, exitFailed, out)
	}
	refused := "refusing the dispatch directory " + d + ": others could replace this path: " + shared + ": it is writable by group without the sticky bit"
	for _, job := range []string{"a100-0", "h100-0"} {
		if !regexp.MustCompile(`missing: job ` + job + ` \(slurm [0-9]+ on node1\): no node bundle; FAILED[^;\n]*; ` + regexp.QuoteMeta(refused)).MatchString(out) {
			t.Errorf("collect does not say job %s is missing because its dispatch directory was refused:\n%s", job, out)
		}
		if log := jobLog(t, d, job); !strings.Contains(log, refused) {
			t.Errorf("%s's log does not say the node refused the directory:\n%s", job, log)
		}
	}
	if signed, _ := filepath.Glob(filepath.Join(shared, "*", "jobs", "*", "node.intoto.jsonl")); len(signed) != 0 {
		t.Errorf("node bundles signed in a swapped dispatch directory: %v", signed)
	}
	if b, err := os.ReadFile(filepath.Join(d, "jobs", "a100-0", "run", "run.json")); err != nil || !strings.Contains(string(b), "planted") {
		t.Errorf("the planted run record changed (%v): %s", err, b)
	}
}

func uidOf(u *user.User) int { n, _ := strconv.Atoi(u.Uid); return n }
func gidOf(u *user.User) int { n, _ := strconv.Atoi(u.Gid); return n }

func chown(t *testing.T, path string, u *user.User) {
	t.Helper()
	if err := os.Chown(path, uidOf(u), gidOf(u)); err != nil {
		t.Fatal(err)
	}
}

// TestFleetCoordinatorKeepsItsDispatch (item 5): collect, report and
// push check the nodes against the dispatch the coordinator signed and
// kept, never the shared directory's copy: an older dispatch of the same
// owner put back with its own node bundles fails the collect, and the
// dispatch re-signed by another key in the shared directory is not what
// collect keeps (verify with the owner's key passes); in the run
// directory, push and report refuse it.
func TestFleetCoordinatorKeepsItsDispatch(t *testing.T) {
	dir := fleetSetup(t)
	if code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run1", "--simulate-gpus", "-q", "--timeout", "2m"); code != 0 {
		t.Fatalf("the first run --fleet: exit %d\n%s", code, out)
	}
	old := dispatchDir(t, dir)
	if code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q", "--detach"); code != 0 {
		t.Fatalf("run --fleet --detach: exit %d\n%s", code, out)
	}
	var d string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ds, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "dispatch.intoto.jsonl"))
		for _, p := range ds {
			if filepath.Dir(p) != old {
				d = filepath.Dir(p)
			}
		}
		if done, _ := filepath.Glob(filepath.Join(d, "jobs", "*", "node.intoto.jsonl")); d != "" && len(done) == 2 {
			break
		}
	}
	files := []string{"dispatch.intoto.jsonl", "jobs/a100-0/node.intoto.jsonl", "jobs/h100-0/node.intoto.jsonl"}
	save := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(d, f))
		if err != nil {
			t.Fatalf("the second dispatch's %s: %v", f, err)
		}
		save[f] = b
		// Roll back: the older dispatch and its own node bundles.
		if b, err = os.ReadFile(filepath.Join(old, f)); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(d, f), string(b))
	}
	code, out := fleetCLI(t, dir, "fleet", "collect", "run", "--timeout", "2m", "--allow-simulated")
	if code != exitFailed || !strings.Contains(out, "fleet dispatch: FAILED") || strings.Count(out, "counts for no job") != 2 {
		t.Errorf("collect of a rolled-back dispatch: exit %d, want %d with both node bundles counting for no job\n%s", code, exitFailed, out)
	}
	// The node bundles back; the dispatch re-signed by another key.
	for _, f := range files {
		write(t, filepath.Join(d, f), string(save[f]))
	}
	write(t, filepath.Join(d, "dispatch.intoto.jsonl"), string(resignFile(t, filepath.Join(d, "dispatch.intoto.jsonl"))))
	if code, out := fleetCLI(t, dir, "fleet", "collect", "run", "--timeout", "2m", "--allow-simulated"); code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") {
		t.Errorf("collect: exit %d\n%s", code, out)
	}
	if code, out := fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated"); code != 0 {
		t.Errorf("verify of the collected run with the owner's key: exit %d, want 0 (the coordinator's own dispatch)\n%s", code, out)
	}
	// In the run directory itself: push and report refuse it.
	own := filepath.Join(dir, "run", "dispatch.intoto.jsonl")
	kept, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	write(t, own, string(resignFile(t, own)))
	host := registrytest.StartInProcess(t, nil)
	if code, out := fleetCLI(t, dir, "fleet", "push", "run", host+"/kernels:v1", "--allow-simulated"); code != exitFailed || !strings.Contains(out, "not the dispatch this run signed") {
		t.Errorf("push of a run whose dispatch was re-signed: exit %d, want %d\n%s", code, exitFailed, out)
	}
	if code, out := fleetCLI(t, dir, "fleet", "push", "run", host+"/kernels:v1", "--allow-failed"); code != exitFailed || !strings.Contains(out, "not the dispatch this run signed") {
		t.Errorf("push --allow-failed of a run whose dispatch was re-signed: exit %d, want %d\n%s", code, exitFailed, out)
	}
	if code, out := fleetCLI(t, dir, "report", "run", "--markdown", "-"); code == 0 || !strings.Contains(out, "not the dispatch this run signed") {
		t.Errorf("report of a run whose dispatch was re-signed: exit %d, want a refusal\n%s", code, out)
	}
	write(t, own, string(kept))
	if code, out := fleetCLI(t, dir, "fleet", "push", "run", host+"/kernels:v1", "--allow-simulated"); code != 0 {
		t.Errorf("push: exit %d\n%s", code, out)
	}
	if code, out := fleetCLI(t, dir, "verify", host+"/kernels:v1", "--key", "rel.pub", "--allow-simulated"); code != 0 {
		t.Errorf("verify REF: exit %d\n%s", code, out)
	}
}

// hostileStepPipeline's GPU step, on the host runner with no sandbox,
// replaces the job's step file: a100-0's with a link to /dev/zero,
// h100-0's with a FIFO; then it keeps running while the coordinator
// polls.
const hostileStepPipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: fleet-demo
targets: [sm_80, sm_90]
steps:
  - id: build
    run: mkdir -p out && echo kernel > out/kernels.fatbin
    outputs: [out/kernels.fatbin]
  - id: check
    gpu: true
    needs: [build]
    run: rm -f ../step && case "$(pwd -P)" in */a100-0/*) ln -s /dev/zero ../step ;; *) mkfifo ../step ;; esac && sleep 4
`

// TestFleetHostileStepFile (item 9): the coordinator reads each job's
// step file bounded, a regular file only, following no link: a step that
// turns it into a link to /dev/zero or a FIFO neither exhausts its
// memory nor hangs it. The collect runs as its own process, under a
// 4 GiB address-space limit and a time limit.
func TestFleetHostileStepFile(t *testing.T) {
	dir := fleetSetup(t)
	write(t, filepath.Join(dir, "proj", "p.yaml"), hostileStepPipeline)
	b, err := os.ReadFile(filepath.Join(dir, "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "fleet.yaml"), strings.Replace(string(b), "\nclasses:\n", "\nhostSteps: unsandboxed\nclasses:\n", 1))
	if code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q", "--detach"); code != 0 {
		t.Fatalf("run --fleet --detach: exit %d\n%s", code, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "gpuattest")
	if err := os.Link(self, bin); err != nil {
		if b, rerr := os.ReadFile(self); rerr != nil || os.WriteFile(bin, b, 0o755) != nil {
			t.Fatalf("copying the test binary: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `ulimit -v 4194304 && exec "$0" fleet collect run --timeout 2m`, bin)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("collect did not end within 3 minutes\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "fleet dispatch: PASSED") {
		t.Errorf("collect: %v, want it to pass\n%s", err, out)
	}
	for _, job := range []string{"a100-0", "h100-0"} {
		if !regexp.MustCompile(`(?m)^  ` + job + ` +[0-9]+ +RUNNING`).Match(out) {
			t.Errorf("no progress line for %s while it ran:\n%s", job, out)
		}
	}
}
