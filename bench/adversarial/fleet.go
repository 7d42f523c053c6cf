package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	"time"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/rusage"
	"github.com/gpuattest/gpuattest/internal/slurmtest"
)

// fleetCases (issue 30): a fleet on a real Slurm (internal/slurmtest)
// that trusts nothing on the shared directory, attacked as the red team
// did:
//
//   - a stand-in gpuattest on the shared directory never runs (the job
//     script checks a private copy's digest first), and a node refuses a
//     dispatch file whose digest is not the one the job script pins, even
//     the same statement signed by another key (item 1);
//   - a node resumes only a run directory bound to its own job, not
//     another job's run whose steps passed, copied into its place; a
//     sharedDir that group members can rename entries of is refused at
//     staging; the sticky bit keeps a group member from renaming the
//     owner's dispatch directory; and when it goes after staging, the
//     owner's nodes refuse the directory the group member swapped in (the
//     real binary and dispatch, keys/ a link to the owner's, a planted
//     run record) and sign nothing (item 2, two real users);
//   - collect checks the nodes against the coordinator's own dispatch: a
//     rollback to an older dispatch of the same owner with its node
//     bundles fails, the shared copy re-signed by another key is not what
//     collect keeps, and push refuses a run whose copy was re-signed
//     (item 5);
//   - a step that turns its job's step file into a link to /dev/zero or a
//     FIFO neither hangs the coordinator nor grows its memory (item 9).
//
// It needs root, Slurm, munge and bubblewrap (Require).
func fleetCases(ctx context.Context, l *lab) ([]result, error) {
	if err := fleetReady(); err != nil {
		return nil, err
	}
	c, stop, err := slurmtest.Serve(nil)
	if err != nil {
		return nil, err
	}
	defer stop()
	dir, err := dirOutsideScratch("gpuattest-adversarial-fleet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	f := &fleetLab{lab: l, dir: dir, conf: c.Conf}
	if err := f.setup(ctx); err != nil {
		return nil, err
	}
	var rs []result
	for _, part := range []func(context.Context) ([]result, error){f.nodeChecks, f.hostileStepFile, f.coordinator, f.twoUsers} {
		r, err := part(ctx)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r...)
	}
	return rs, nil
}

// fleetTools are what the fleet category needs on PATH.
var fleetTools = []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "bwrap", "useradd", "groupadd", "usermod"}

// fleetReady says why the fleet category cannot run here, or nil.
func fleetReady() error {
	if os.Geteuid() != 0 {
		return errors.New("the fleet category needs root (a local Slurm, and two users)")
	}
	for _, t := range fleetTools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("the fleet category needs %s", t)
		}
	}
	return nil
}

// dirOutsideScratch makes a directory (0755) outside the directories a
// node's sandbox empties (/tmp, /var/tmp, ...): the working directory
// first, as internal/testenv.DirOutside does.
func dirOutsideScratch(pattern string) (string, error) {
	for _, c := range []string{".", "/var/cache/gpuattest-test", "/var/lib", "/srv"} {
		abs, err := filepath.Abs(c)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if strings.HasPrefix(abs+"/", "/tmp/") || strings.HasPrefix(abs+"/", "/var/tmp/") || strings.HasPrefix(abs+"/", "/home/") || strings.HasPrefix(abs+"/", "/root/") {
			continue
		}
		dir, err := os.MkdirTemp(abs, pattern)
		if err != nil {
			continue
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		return dir, nil
	}
	return "", errors.New("no writable directory outside /tmp, /var/tmp, /home and /root for the fleet's shared directory")
}

// fleetLab is the fleet category's workspace: a directory with the
// binary, the owner's key and a project, and the cluster's
// configuration.
type fleetLab struct {
	*lab
	dir, conf, bin string
	runs           int
}

// fleetProject's GPU step runs the harness the build made; with %STEP%
// replaced it does more.
const fleetProject = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: fleet-adv
targets: [sm_80, sm_90]
steps:
  - id: build
    run: mkdir -p out && echo kernel > out/kernels.fatbin && printf '#!/bin/sh\necho harness ok\n' > out/harness && chmod +x out/harness
    outputs: [out/kernels.fatbin, out/harness]
  - id: check
    gpu: true
    needs: [build]
    run: ./out/harness%STEP%
`

// fleetClasses is a fleet file's classes: NAME:TYPE, the gres type's
// target sm_80 (a100) or sm_90 (h100).
func fleetFile(shared, extra string, classes ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: gpuattest.dev/v1\nkind: Fleet\nengine: slurm\npartition: gpu\nsharedDir: %s\n%sclasses:\n", shared, extra)
	for _, c := range classes {
		name, typ, _ := strings.Cut(c, ":")
		sm := map[string]string{"a100": "sm_80", "h100": "sm_90"}[typ]
		fmt.Fprintf(&b, "  - {name: %s, gres: \"gpu:%s:1\", constraint: %s, targets: [%s], timeLimit: 5m}\n", name, typ, sm, sm)
	}
	return b.String()
}

func (f *fleetLab) setup(ctx context.Context) error {
	f.bin = filepath.Join(f.dir, "bin", "gpuattest")
	b, err := os.ReadFile(f.lab.bin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.bin), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(f.bin, b, 0o755); err != nil {
		return err
	}
	if out, err := f.callOK(ctx, f.dir, nil, "key", "generate", "--no-password", "--output-key-prefix", filepath.Join(f.dir, "rel")); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

// slurmEnv is what every call of the fleet needs besides the lab's.
func (f *fleetLab) slurmEnv() []string {
	return []string{"SLURM_CONF=" + f.conf, "GPUATTEST_FLEET_POLL=300ms", "GPUATTEST_PASSWORD="}
}

// project writes a project (pipeline with step, fleet file) in a new
// directory under f.dir, with its own shared directory, and returns it.
func (f *fleetLab) project(step, extra string, classes ...string) (string, error) {
	f.runs++
	dir := filepath.Join(f.dir, fmt.Sprintf("p%d", f.runs))
	for _, d := range []string{"proj", "shared"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "proj", "p.yaml"), []byte(strings.ReplaceAll(fleetProject, "%STEP%", step)), 0o644); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(fleetFile(filepath.Join(dir, "shared"), extra, classes...)), 0o644)
}

// gpuattest runs gpuattest in dir (as cred's user when set) with the
// fleet's environment.
func (f *fleetLab) gpuattest(ctx context.Context, dir string, cred *syscall.Credential, extra []string, args ...string) (rusage.Usage, string, error) {
	env := append(append(append([]string{}, f.lab.env...), f.slurmEnv()...), extra...)
	return f.spawner.run(ctx, spawnReq{Dir: dir, Env: env, Argv: append([]string{f.bin}, args...), Timeout: 5 * time.Minute, Cred: cred})
}

// dispatch runs run --fleet in dir, --detach unless attached, and
// returns the call's outcome and the dispatch directory.
func (f *fleetLab) dispatch(ctx context.Context, dir string, attached bool, cred *syscall.Credential, extra []string) (rusage.Usage, string, string, error) {
	key := filepath.Join(f.dir, "rel.key")
	if cred != nil {
		key = filepath.Join(dir, "rel.key") // the user's own copy
	}
	args := []string{"run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", key, "--out", "run", "--simulate-gpus", "-q"}
	if !attached {
		args = append(args, "--detach")
	}
	u, out, err := f.gpuattest(ctx, dir, cred, extra, args...)
	if err != nil {
		return u, out, "", err
	}
	var st struct {
		Dispatch string `json:"dispatch"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "run", "fleet.json")); err == nil && json.Unmarshal(b, &st) == nil {
		return u, out, st.Dispatch, nil
	}
	return u, out, "", nil
}

// slurm runs a Slurm client command against the category's cluster.
func (f *fleetLab) slurm(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+f.conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// block holds the one GPU of gres type typ with a job, and waits for it
// to run; it returns its ID.
func (f *fleetLab) block(ctx context.Context, typ string) (string, error) {
	id, err := f.slurm(ctx, "sbatch", "--parsable", "--gres=gpu:"+typ+":1", "--output=/dev/null", "--wrap", "sleep 300")
	if err != nil {
		return "", err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st, _ := f.slurm(ctx, "squeue", "-h", "-j", id, "-o", "%T"); st == "RUNNING" {
			return id, nil
		}
	}
	return "", fmt.Errorf("the %s blocker %s never ran", typ, id)
}

// runAlone releases the held job id and waits until it has ended.
func (f *fleetLab) runAlone(ctx context.Context, id string) error {
	if _, err := f.slurm(ctx, "scontrol", "release", id); err != nil {
		return err
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		switch st, _ := f.slurm(ctx, "squeue", "-h", "-j", id, "-o", "%T"); st {
		case "PENDING", "CONFIGURING", "RUNNING", "COMPLETING":
			continue
		}
		return nil
	}
	return fmt.Errorf("job %s did not end within two minutes", id)
}

// jobIDs are the Slurm job IDs of the dispatch in dir's run directory,
// by job name.
func jobIDs(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "run", "fleet.json"))
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`"name": "([a-z0-9-]+)",\s*"class": "[a-z0-9-]+",\s*"index": [0-9]+,\s*"id": "([0-9]+)"`).FindAllSubmatch(b, -1) {
		ids[string(m[1])] = string(m[2])
	}
	return ids, nil
}

// jobLog is what job's Slurm logs in the dispatch directory d say.
func jobLog(d, job string) string {
	logs, _ := filepath.Glob(filepath.Join(d, "logs", job+"-*.log"))
	var b strings.Builder
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		b.Write(data)
	}
	return b.String()
}

// resigned is the bundle file at path with its statement signed again by
// a new key: the same statement, other bytes.
func (f *fleetLab) resigned(ctx context.Context, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st, err := sign.UnverifiedStatement(bytes.TrimSpace(b))
	if err != nil {
		return nil, err
	}
	kp, err := sign.GenerateKeyPair(filepath.Join(f.dir, fmt.Sprintf("stranger-%d", time.Now().UnixNano())), nil)
	if err != nil {
		return nil, err
	}
	priv, err := sign.LoadPrivateKey(kp.Private, nil)
	if err != nil {
		return nil, err
	}
	s, err := sign.NewKeySigner(priv)
	if err != nil {
		return nil, err
	}
	nb, err := s.Sign(ctx, st)
	if err != nil {
		return nil, err
	}
	return append(nb, '\n'), nil
}

// want is a case's result: right when every check holds, else the first
// that fails, with the output's tail.
func want(name string, u rusage.Usage, out string, checks ...check) result {
	r := result{name: name, usage: u, right: true}
	if c := crashed(u, out); c != "" {
		r.right, r.why = false, c+tail(out)
		return r
	}
	for _, c := range checks {
		if !c.ok {
			r.right, r.why = false, c.why+tail(out)
			return r
		}
	}
	return r
}

// check is one condition of a case.
type check struct {
	ok  bool
	why string
}

func exits(u rusage.Usage, codes ...int) check {
	for _, c := range codes {
		if u.Exit == c {
			return check{ok: true}
		}
	}
	return check{why: fmt.Sprintf("exit %d, want %v", u.Exit, codes)}
}

func says(out, s string) check {
	return check{ok: strings.Contains(out, s), why: fmt.Sprintf("the output does not say %q", s)}
}

// nodeChecks: one dispatch of four jobs, held and released one at a
// time: a100-0 runs as it should; resumed-0 finds a100-0's run directory
// and binding in its place; standin-0 finds a stand-in binary; redispatch-0
// finds the dispatch re-signed by another key.
func (f *fleetLab) nodeChecks(ctx context.Context) ([]result, error) {
	dir, err := f.project("", "", "a100:a100", "resumed:a100", "standin:h100", "redispatch:h100")
	if err != nil {
		return nil, err
	}
	var blockers []string
	for _, typ := range []string{"a100", "h100"} {
		id, err := f.block(ctx, typ)
		if err != nil {
			return nil, err
		}
		blockers = append(blockers, id)
	}
	u, out, d, err := f.dispatch(ctx, dir, false, nil, nil)
	if err != nil || u.Exit != 0 || d == "" {
		return nil, fmt.Errorf("run --fleet --detach: exit %d, %v\n%s", u.Exit, err, out)
	}
	ids, err := jobIDs(dir)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, err := f.slurm(ctx, "scontrol", "hold", id); err != nil {
			return nil, err
		}
	}
	if _, err := f.slurm(ctx, "scancel", blockers...); err != nil {
		return nil, err
	}
	if err := f.runAlone(ctx, ids["a100-0"]); err != nil {
		return nil, err
	}
	if err := plantRun(d, "a100-0", "resumed-0"); err != nil {
		return nil, err
	}
	if err := f.runAlone(ctx, ids["resumed-0"]); err != nil {
		return nil, err
	}
	bin := filepath.Join(d, "bin", "gpuattest")
	markErr, standinLog, err := f.runStandIn(ctx, dir, d, "standin-0", ids["standin-0"])
	if err != nil {
		return nil, err
	}
	// The dispatch statement re-signed by another key.
	file := filepath.Join(d, "dispatch.intoto.jsonl")
	own, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	other, err := f.resigned(ctx, file)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, other, 0o644); err != nil {
		return nil, err
	}
	if err := f.runAlone(ctx, ids["redispatch-0"]); err != nil {
		return nil, err
	}
	redispatchLog := jobLog(d, "redispatch-0")
	if err := os.WriteFile(file, own, 0o644); err != nil {
		return nil, err
	}
	u, out, err = f.gpuattest(ctx, dir, nil, nil, "fleet", "collect", "run", "--timeout", "2m")
	if err != nil {
		return nil, err
	}
	return []result{
		want("item 1: a stand-in gpuattest on the shared directory never runs; the job refuses it", u, standinLog,
			check{ok: errors.Is(markErr, os.ErrNotExist), why: "the stand-in ran"}, says(standinLog, "refusing to run "+bin+": it is sha256:"),
			says(out, "missing: job standin-0 (slurm "+ids["standin-0"]+" on node1): no node bundle")),
		want("item 1: the dispatch file re-signed by another key is refused by the node", u, redispatchLog,
			says(redispatchLog, "refusing to run: the dispatch file "+file+" is sha256:"), says(out, "missing: job redispatch-0 (slurm "+ids["redispatch-0"]+" on node1): no node bundle")),
		want("item 2: another job's run directory and binding, its steps passed, are not resumed", u, out, exits(u, 1),
			says(out, "FAIL job resumed-0 (class resumed): failed: on node node1: refusing to resume the run in "+filepath.Join(d, "jobs", "resumed-0", "run")+": its binding is not this job's")),
	}, nil
}

// plantRun copies job from's run directory and binding (its steps passed)
// into job to's place.
func plantRun(d, from, to string) error {
	for _, name := range []string{"run", "run.binding"} {
		src, dst := filepath.Join(d, "jobs", from, name), filepath.Join(d, "jobs", to, name)
		fi, err := os.Stat(src)
		switch {
		case err == nil && fi.IsDir():
			err = os.CopyFS(dst, os.DirFS(src))
		case err == nil:
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = os.WriteFile(dst, b, 0o600)
			}
		}
		if err != nil {
			return fmt.Errorf("%s ran but left no %s: %w\n%s", from, name, err, jobLog(d, from))
		}
	}
	return nil
}

// runStandIn puts a stand-in binary that would leave a mark in place of
// the staged gpuattest, runs job (slurm id) alone, and puts the real one back.
// It returns what stat of the mark said and the job's log.
func (f *fleetLab) runStandIn(ctx context.Context, dir, d, job, id string) (markErr error, log string, err error) {
	bin := filepath.Join(d, "bin", "gpuattest")
	real, err := os.ReadFile(bin)
	if err != nil {
		return nil, "", err
	}
	mark := filepath.Join(dir, "stand-in-ran")
	if err := os.Remove(bin); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho ran > "+mark+"\n"), 0o755); err != nil {
		return nil, "", err
	}
	if err := f.runAlone(ctx, id); err != nil {
		return nil, "", err
	}
	_, markErr = os.Stat(mark)
	log = jobLog(d, job)
	if err := os.Remove(bin); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(bin, real, 0o755); err != nil {
		return nil, "", err
	}
	return markErr, log, nil
}

// hostileStepFile: with hostSteps: unsandboxed, the GPU step turns its
// job's step file into a link to /dev/zero (a100-0) or a FIFO (h100-0)
// and keeps running while collect polls.
func (f *fleetLab) hostileStepFile(ctx context.Context) ([]result, error) {
	dir, err := f.project(` && rm -f ../step && case "$(pwd -P)" in */a100-0/*) ln -s /dev/zero ../step ;; *) mkfifo ../step ;; esac && sleep 4`,
		"hostSteps: unsandboxed\n", "a100:a100", "h100:h100")
	if err != nil {
		return nil, err
	}
	u, out, d, err := f.dispatch(ctx, dir, false, nil, nil)
	if err != nil || u.Exit != 0 || d == "" {
		return nil, fmt.Errorf("run --fleet --detach: exit %d, %v\n%s", u.Exit, err, out)
	}
	// Under a 4 GiB address-space limit: a coordinator that read /dev/zero
	// would take the machine's memory.
	env := append(append([]string{}, f.lab.env...), f.slurmEnv()...)
	u, out, err = f.spawner.run(ctx, spawnReq{Dir: dir, Env: env, Timeout: 5 * time.Minute,
		Argv: []string{"sh", "-c", `ulimit -v 4194304 && exec "$0" "$@"`, f.bin, "fleet", "collect", "run", "--timeout", "2m"}})
	if err != nil {
		return nil, err
	}
	bounded := check{ok: u.MaxRSS <= goalRSS, why: fmt.Sprintf("collect's peak RSS %.1f MiB, over %.0f MiB", mib(u.MaxRSS), mib(goalRSS))}
	return []result{
		want("item 9: a step file linked to /dev/zero: collect ends, its memory bounded", u, out, exits(u, 0), says(out, "fleet dispatch: PASSED"), bounded),
		want("item 9: a step file made a FIFO: collect does not hang", u, out, exits(u, 0), says(out, "h100-0           h100")),
	}, nil
}

// coordinator: a dispatch that passed, then one rolled back to it on the
// shared directory, then its shared copy re-signed by another key, then
// its run directory's copy re-signed.
func (f *fleetLab) coordinator(ctx context.Context) ([]result, error) {
	olderDir, err := f.project("", "", "a100:a100", "h100:h100")
	if err != nil {
		return nil, err
	}
	if u, out, _, err := f.dispatch(ctx, olderDir, true, nil, nil); err != nil || u.Exit != 0 {
		return nil, fmt.Errorf("the older dispatch: exit %d, %v\n%s", u.Exit, err, out)
	}
	older, _ := filepath.Glob(filepath.Join(olderDir, "shared", "*"))
	dir, err := f.project("", "", "a100:a100", "h100:h100")
	if err != nil {
		return nil, err
	}
	u, out, d, err := f.dispatch(ctx, dir, false, nil, nil)
	if err != nil || u.Exit != 0 || d == "" || len(older) != 1 {
		return nil, fmt.Errorf("run --fleet --detach: exit %d, %v\n%s", u.Exit, err, out)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if done, _ := filepath.Glob(filepath.Join(d, "jobs", "*", "node.intoto.jsonl")); len(done) == 2 {
			break
		}
	}
	files := []string{"dispatch.intoto.jsonl", "jobs/a100-0/node.intoto.jsonl", "jobs/h100-0/node.intoto.jsonl"}
	save := map[string][]byte{}
	for _, name := range files {
		if save[name], err = os.ReadFile(filepath.Join(d, name)); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(older[0], name))
		if err == nil {
			err = os.WriteFile(filepath.Join(d, name), b, 0o644)
		}
		if err != nil {
			return nil, err
		}
	}
	rollback, rout, err := f.gpuattest(ctx, dir, nil, nil, "fleet", "collect", "run", "--timeout", "2m")
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(d, name), save[name], 0o644); err != nil {
			return nil, err
		}
	}
	other, err := f.resigned(ctx, filepath.Join(d, "dispatch.intoto.jsonl"))
	if err == nil {
		err = os.WriteFile(filepath.Join(d, "dispatch.intoto.jsonl"), other, 0o644)
	}
	if err != nil {
		return nil, err
	}
	cu, cout, err := f.gpuattest(ctx, dir, nil, nil, "fleet", "collect", "run", "--timeout", "2m")
	if err != nil {
		return nil, err
	}
	vu, vout, err := f.gpuattest(ctx, dir, nil, nil, "fleet", "verify", "run", "--key", filepath.Join(f.dir, "rel.pub"), "--allow-simulated")
	if err != nil {
		return nil, err
	}
	own := filepath.Join(dir, "run", "dispatch.intoto.jsonl")
	other, err = f.resigned(ctx, own)
	if err == nil {
		err = os.WriteFile(own, other, 0o644)
	}
	if err != nil {
		return nil, err
	}
	pu, pout, err := f.gpuattest(ctx, dir, nil, nil, "fleet", "push", "run", "oci-layout:"+filepath.Join(dir, "layout"), "--allow-failed")
	if err != nil {
		return nil, err
	}
	return []result{
		want("item 5: collect of a dispatch rolled back to the owner's older one, with its node bundles, fails", rollback, rout, exits(rollback, 1),
			check{ok: strings.Count(rout, "counts for no job") == 2, why: "both node bundles do not count for no job"}),
		want("item 5: collect keeps its own dispatch, not the shared copy re-signed by another key", cu, cout, exits(cu, 0), says(cout, "fleet dispatch: PASSED")),
		want("item 5: the collected run verifies with the owner's key", vu, vout, exits(vu, 0)),
		want("item 5: push refuses a run whose dispatch copy was re-signed", pu, pout, exits(pu, 1), says(pout, "not the dispatch this run signed")),
	}, nil
}

// twoUsersProject makes the users gpuattest-alice and gpuattest-mallory of
// group gpuattest-proj and a project alice owns, with her key, whose
// shared directory belongs to root and the group. It returns their
// credentials, the project and alice's environment.
func (f *fleetLab) twoUsersProject() (ac, mc *syscall.Credential, dir string, home []string, err error) {
	alice, err := slurmtest.EnsureUser("gpuattest-alice", "gpuattest-proj")
	if err != nil {
		return nil, nil, "", nil, err
	}
	mallory, err := slurmtest.EnsureUser("gpuattest-mallory", "gpuattest-proj")
	if err != nil {
		return nil, nil, "", nil, err
	}
	g, err := user.LookupGroup("gpuattest-proj")
	if err != nil {
		return nil, nil, "", nil, err
	}
	gid, _ := strconv.Atoi(g.Gid)
	cred := func(u *user.User) *syscall.Credential {
		uid, _ := strconv.Atoi(u.Uid)
		ugid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(ugid), Groups: []uint32{uint32(gid)}}
	}
	ac, mc = cred(alice), cred(mallory)
	dir, err = f.project("", "", "a100:a100", "h100:h100")
	if err != nil {
		return nil, nil, "", nil, err
	}
	shared := filepath.Join(dir, "shared")
	// alice's key and project; the shared directory root's, the group's.
	for _, name := range []string{"rel.key", "rel.pub"} {
		b, err := os.ReadFile(filepath.Join(f.dir, name))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o600)
		}
		if err != nil {
			return nil, nil, "", nil, err
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "proj"), filepath.Join(dir, "proj", "p.yaml"), filepath.Join(dir, "fleet.yaml"), filepath.Join(dir, "rel.key"), filepath.Join(dir, "rel.pub")} {
		if err := os.Chown(p, int(ac.Uid), int(ac.Gid)); err != nil {
			return nil, nil, "", nil, err
		}
	}
	if err := os.Chown(shared, 0, gid); err != nil {
		return nil, nil, "", nil, err
	}
	home = []string{"HOME=" + dir, "TMPDIR=" + dir, "XDG_CACHE_HOME=" + filepath.Join(dir, ".cache")}
	return ac, mc, dir, home, nil
}

// twoUsers: alice dispatches; mallory, in her group, can read no key.
func (f *fleetLab) twoUsers(ctx context.Context) ([]result, error) {
	ac, mc, dir, home, err := f.twoUsersProject()
	if err != nil {
		return nil, err
	}
	shared := filepath.Join(dir, "shared")
	var rs []result

	// 2775: refused at staging.
	if err := os.Chmod(shared, 0o775|os.ModeSetgid); err != nil {
		return nil, err
	}
	u, out, err := f.gpuattest(ctx, dir, ac, home, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "refused", "--simulate-gpus", "-q")
	if err != nil {
		return nil, err
	}
	left, _ := os.ReadDir(shared)
	rs = append(rs, want("item 2: a sharedDir group members can rename entries of (2775) is refused at staging, with a hint", u, out, exits(u, 1),
		says(out, "refusing to stage in sharedDir "+shared+": others could replace this path: "+shared+": it is writable by group without the sticky bit"),
		says(out, "chmod +t "+shared), check{ok: len(left) == 0, why: "staging left entries in the refused sharedDir"}))

	// 3775: staged; mallory cannot rename alice's directory.
	if err := os.Chmod(shared, 0o775|os.ModeSetgid|os.ModeSticky); err != nil {
		return nil, err
	}
	var blockers []string
	for _, typ := range []string{"a100", "h100"} {
		id, err := f.block(ctx, typ)
		if err != nil {
			return nil, err
		}
		blockers = append(blockers, id)
	}
	u, out, d, err := f.dispatch(ctx, dir, false, ac, home)
	if err != nil || u.Exit != 0 || d == "" {
		return nil, fmt.Errorf("run --fleet --detach as alice: exit %d, %v\n%s", u.Exit, err, out)
	}
	u, out, err = f.spawner.run(ctx, spawnReq{Dir: dir, Env: f.lab.env, Argv: []string{"mv", d, d + ".old"}, Timeout: time.Minute, Cred: mc})
	if err != nil {
		return nil, err
	}
	rs = append(rs, want("item 2: the sticky bit keeps a group member from renaming the owner's dispatch directory", u, out,
		check{ok: u.Exit != 0, why: "mallory renamed alice's dispatch directory"}, says(out, "Operation not permitted")))

	// The sticky bit goes; mallory swaps the directory.
	if err := os.Chmod(shared, 0o775|os.ModeSetgid); err != nil {
		return nil, err
	}
	id := filepath.Base(d)
	plant := fmt.Sprintf(`set -e
cd %s
mv %[2]s %[2]s.old
mkdir -m 0777 %[2]s %[2]s/logs %[2]s/jobs %[2]s/jobs/a100-0 %[2]s/jobs/h100-0
mkdir %[2]s/jobs/a100-0/run
cp -r %[2]s.old/bin %[2]s.old/work %[2]s.old/job.sh %[2]s.old/dispatch.intoto.jsonl %[2]s/
ln -s ../%[2]s.old/keys %[2]s/keys
echo '{"planted": "a GPU step that passed"}' > %[2]s/jobs/a100-0/run/run.json
`, shared, id)
	if u, out, err := f.spawner.run(ctx, spawnReq{Dir: dir, Env: f.lab.env, Argv: []string{"sh", "-c", plant}, Timeout: time.Minute, Cred: mc}); err != nil || u.Exit != 0 {
		return nil, fmt.Errorf("mallory's swap: exit %d, %v\n%s", u.Exit, err, out)
	}
	if _, err := f.slurm(ctx, "scancel", blockers...); err != nil {
		return nil, err
	}
	u, out, err = f.gpuattest(ctx, dir, ac, home, "fleet", "collect", "run", "--timeout", "2m")
	if err != nil {
		return nil, err
	}
	signed, _ := filepath.Glob(filepath.Join(shared, "*", "jobs", "*", "node.intoto.jsonl"))
	refused := "refusing the dispatch directory " + d + ": others could replace this path: " + shared + ": it is writable by group without the sticky bit"
	logs := jobLog(d, "a100-0") + jobLog(d, "h100-0")
	rs = append(rs, want("item 2: a dispatch directory swapped by a group member is refused by every node, which signs nothing", u, out+logs, exits(u, 1),
		check{ok: strings.Count(logs, refused) == 2, why: "the two jobs' logs do not both say the node refused the directory"},
		check{ok: strings.Count(out, "): no node bundle; ") == 2, why: "collect does not report both jobs missing"},
		check{ok: len(signed) == 0, why: fmt.Sprintf("node bundles signed in the swapped directory: %v", signed)}))
	return rs, nil
}
