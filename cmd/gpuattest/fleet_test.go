package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/internal/slurmtest"
	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
	"github.com/gpuattest/gpuattest/pipeline/runner"
)

// fleetPipeline builds once (a fake fatbin and a harness) and runs one
// GPU step on the host runner on every node, which fails if it can read a
// job key: beside its work tree (../job.key, where one was staged
// before), by a relative path to the dispatch's keys (../../../keys/),
// by their absolute path, by a walk of the shared directory, or under
// $HOME (fleetSetup sets HOME to the directory that holds the shared one,
// as a cluster with shared home directories does). The node's sandbox
// hides the shared directory; with hostSteps: unsandboxed the step finds
// the key and fails.
var fleetPipeline = fleettest.Pipeline("fleet-demo", "", `! { cat ../job.key ../../../keys/*.key %SHARED%/*/keys/*.key; find %SHARED% -name '*.key' -exec cat {} +; grep -rs "PRIVATE KEY" "$HOME"; } 2>/dev/null | grep -q PRIVATE`)

// fleetFile is a two-class fleet on the test cluster's one node.
const fleetFile = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: slurm
partition: gpu
sharedDir: %SHARED%
classes:
  - name: a100
    gres: gpu:a100:1
    constraint: sm_80
    targets: [sm_80]
    timeLimit: 5m
  - name: h100
    gres: gpu:h100:1
    constraint: sm_90
    targets: [sm_90]
    timeLimit: 5m
`

// fleetSetup starts a local Slurm and writes the pipeline, the fleet file
// and an owner key; it returns the directory holding them.
func fleetSetup(t *testing.T) string {
	t.Helper()
	return fleetSetupNode(t, nil)
}

// fleetSetupNode is fleetSetup on a node configured as conf (the
// default node when nil).
func fleetSetupNode(t *testing.T, conf *slurmtest.Config) string {
	t.Helper()
	c := slurmtest.Start(t, conf)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster's logs:\n%s", c.Logs())
		}
	})
	t.Setenv("SLURM_CONF", c.Conf)
	t.Setenv("GPUATTEST_FLEET_POLL", "300ms")
	t.Setenv("GPUATTEST_PASSWORD", "")
	dir := outsideTmp(t)
	t.Setenv("HOME", dir)
	shared := filepath.Join(dir, "shared")
	for _, d := range []string{"proj", "shared"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "proj", "p.yaml"), strings.ReplaceAll(fleetPipeline, "%SHARED%", shared))
	write(t, filepath.Join(dir, "fleet.yaml"), strings.ReplaceAll(fleetFile, "%SHARED%", shared))
	if code, out := fleetCLI(t, dir, "key", "generate", "--output-key-prefix", "rel", "--no-password"); code != 0 {
		t.Fatalf("key generate: exit %d\n%s", code, out)
	}
	return dir
}

// outsideTmp is a fresh directory outside /tmp and the other directories
// the nodes' sandbox replaces with empty ones (the package's own, unless
// the checkout lies there), removed when the test ends: a shared
// directory under /tmp would be hidden anyway and prove nothing of the
// hiding of the shared directory that a real cluster relies on.
func outsideTmp(t *testing.T) string {
	t.Helper()
	return testenv.DirOutside(t, "fleet-test-", runner.SandboxScratch)
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fleetCLI runs gpuattest in dir in this process and returns its exit code
// and output.
func fleetCLI(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out bytes.Buffer
	code := execute(args, strings.NewReader(""), &out, &out)
	return code, out.String()
}

// TestFleetTwoClassesEndToEnd runs a two-class fleet against a real
// slurmctld and slurmd: the build runs here once, each class's job runs
// the GPU step on a simulated GPU of its gres type, the node bundles are
// signed by their job keys, and verify names every job. With a node
// bundle removed, verify fails naming the job (exit 12).
func TestFleetTwoClassesEndToEnd(t *testing.T) {
	dir := fleetSetup(t)
	code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("run --fleet: exit %d\n%s", code, out)
	}
	// A progress line per job and change: name, Slurm ID, state, node.
	// Which states a poll catches depends on the host's speed (a fast
	// job may be COMPLETED at the first poll): each line names a state
	// of a job's life, no line repeats the one before it, and the last
	// says COMPLETED on node1.
	for _, job := range []string{"a100-0", "h100-0"} {
		lines := regexp.MustCompile(`(?m)^  `+job+` +[0-9]+ +[A-Z_]+.*$`).FindAllString(out, -1)
		if len(lines) == 0 || !regexp.MustCompile(`^  `+job+` +[0-9]+ +COMPLETED +node1 `).MatchString(lines[len(lines)-1]) {
			t.Errorf("no progress line ending in COMPLETED on node1 for %s:\n%s", job, out)
		}
		for i, l := range lines {
			if !regexp.MustCompile(`^  ` + job + ` +[0-9]+ +(PENDING|RUNNING|COMPLETING|COMPLETED) `).MatchString(l + " ") {
				t.Errorf("progress line %q: expected a pending, running or completed job", l)
			}
			if i > 0 && l == lines[i-1] {
				t.Errorf("progress line %q printed twice in a row: one line per change", l)
			}
		}
	}
	for _, want := range []string{"2 job(s) submitted to slurm cluster gpuattest", "fleet dispatch: PASSED", "a100-0", "h100-0", "node1", "target sm_80    a100-0", "target sm_90    h100-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --fleet output lacks %q:\n%s", want, out)
		}
	}
	shared, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "keys", "*.key"))
	if len(shared) != 0 {
		t.Errorf("job keys left on the shared directory after the jobs ended: %v", shared)
	}
	code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated")
	if code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") || !strings.Contains(out, "host steps: sandboxed, as the owner signed") {
		t.Fatalf("fleet verify: exit %d\n%s", code, out)
	}
	for _, job := range []string{"a100-0", "h100-0"} {
		if !regexp.MustCompile(`(?m)^  ` + job + ` .* passed +simulated +host steps sandbox: bwrap$`).MatchString(out) {
			t.Errorf("verify does not list job %s as passed with its host steps sandboxed:\n%s", job, out)
		}
	}
	// report: the build's report with one row per node, in the HTML and
	// the Markdown.
	code, out = fleetCLI(t, dir, "report", "run", "--markdown", "-")
	if code != 0 || !strings.Contains(out, "### Fleet") ||
		!regexp.MustCompile(`\| a100-0 \| a100 \| node1 \| [0-9]+ \| 1x [^|]*A100[^|]* \(8\.0\), simulated \| passed \|`).MatchString(out) ||
		!regexp.MustCompile(`\| h100-0 \| h100 \| node1 \| [0-9]+ \| 1x [^|]*H100[^|]* \(9\.0\), simulated \| passed \|`).MatchString(out) {
		t.Errorf("report run --markdown -: exit %d, want a row per node\n%s", code, out)
	}
	page, err := os.ReadFile(filepath.Join(dir, "run", "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"a100-0", "h100-0"} {
		if !regexp.MustCompile(`<tr data-job="` + job + `"><td><code>` + job + `</code></td><td>[a-z0-9]+</td><td>node1</td><td>[0-9]+</td><td>1x [^<]*simulated</td><td class="good">passed</td>`).Match(page) {
			t.Errorf("report.html has no passed row for %s", job)
		}
	}
	for _, bad := range []string{" href=", " src=", "<script", "<link", "url("} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("report.html holds %q: it must link to nothing outside itself", bad)
		}
	}
	// Simulated GPUs are refused unless allowed.
	if code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub"); code != exitPolicy || !strings.Contains(out, "simulated") {
		t.Errorf("verify without --allow-simulated: exit %d, want %d naming the simulated GPUs\n%s", code, exitPolicy, out)
	}
	// push: the files as one artifact, the dispatch and both node bundles
	// as its referrers.
	host := registrytest.StartInProcess(t, nil)
	code, out = fleetCLI(t, dir, "fleet", "push", "run", host+"/kernels:v1")
	if code != 0 || !regexp.MustCompile(`pushed `+regexp.QuoteMeta(host)+`/kernels@sha256:[0-9a-f]{64}: 2 file\(s\), 3 bundle\(s\) as referrers \(3 written`).MatchString(out) {
		t.Errorf("fleet push: exit %d\n%s", code, out)
	}
	// verify from the registry: the dispatch and the node bundles among
	// the referrers, the dispatch's subjects against the files served.
	code, out = fleetCLI(t, dir, "fleet", "verify", host+"/kernels:v1", "--key", "rel.pub", "--allow-simulated")
	if code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") || !strings.Contains(out, "h100-0           h100") {
		t.Errorf("fleet verify REF: exit %d\n%s", code, out)
	}
	if code, out = fleetCLI(t, dir, "fleet", "verify", host+"/kernels:v1", "--key", "proj/p.yaml"); code != exitUsage {
		t.Errorf("fleet verify REF with a file that is not a key: exit %d, want %d\n%s", code, exitUsage, out)
	}
	// Plain verify recognises the dispatch among the bundles: from the
	// registry, from an OCI layout copy and from the bundle files, with
	// every job, its node and its verdict.
	layoutDir := filepath.Join(dir, "layout")
	copyToLayout(t, host+"/kernels:v1", layoutDir)
	for _, ref := range []string{host + "/kernels:v1", "oci-layout:" + layoutDir} {
		code, out = fleetCLI(t, dir, "verify", ref, "--key", "rel.pub", "--allow-simulated")
		if code != 0 || !strings.Contains(out, "fleet dispatch: PASSED") || !strings.Contains(out, "Verifying a fleet release from ") ||
			!regexp.MustCompile(`(?m)^  a100-0 +a100 +[0-9]+ +node1 +passed`).MatchString(out) || !regexp.MustCompile(`(?m)^  h100-0 +h100 +[0-9]+ +node1 +passed`).MatchString(out) {
			t.Errorf("verify %s: exit %d, want 0 listing both jobs passed on node1\n%s", ref, code, out)
		}
		if strings.Contains(out, "against these criteria") {
			t.Errorf("verify %s prints the validation policy's criteria for a fleet release:\n%s", ref, out)
		}
	}
	checkFleetPull(t, dir, host+"/kernels:v1")
	if code, out = fleetCLI(t, dir, "verify", host+"/kernels:v1", "--key", "rel.pub"); code != exitPolicy || !strings.Contains(out, "the GPUs were simulated") {
		t.Errorf("verify REF without --allow-simulated: exit %d, want %d naming the simulated GPUs\n%s", code, exitPolicy, out)
	}
	released, _ := filepath.Glob(filepath.Join(dir, "run", "release", "out", "kernels.fatbin"))
	if len(released) != 1 {
		t.Fatalf("released fatbin: %v", released)
	}
	bundles := []string{"verify", "--bundle", "run/dispatch.intoto.jsonl", "--bundle", "run/nodes/a100-0.intoto.jsonl", "--bundle", "run/nodes/h100-0.intoto.jsonl", "--key", "rel.pub", "--allow-simulated"}
	code, out = fleetCLI(t, dir, append(bundles, "-o", "json", released[0])...)
	var got struct {
		dispatch.Report
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got.ExitCode != 0 || !got.Verified || got.Artifacts != 1 || len(got.Jobs) != 2 ||
		got.Jobs[0].Job != "a100-0" || got.Jobs[0].Node != "node1" || got.Jobs[0].JobID == "" || got.Jobs[1].Verdict != dispatch.VerdictPassed {
		t.Errorf("verify --bundle -o json: exit %d, %v\n%s", code, err, out)
	}
	if code, out = fleetCLI(t, dir, append(bundles, "proj/p.yaml")...); code != exitSubject || !strings.Contains(out, "artifact proj/p.yaml (sha256:") {
		t.Errorf("verify --bundle with a file that is not a subject: exit %d, want %d naming it\n%s", code, exitSubject, out)
	}
	if code, out = fleetCLI(t, dir, append(bundles, "--policy", "builtin:cpu-tier")...); code != exitUsage || !strings.Contains(out, "replace the policy") {
		t.Errorf("verify --bundle --policy of a fleet release: exit %d, want %d\n%s", code, exitUsage, out)
	}
	code, out = fleetCLI(t, dir, "verify", "--bundle", "run/dispatch.intoto.jsonl", "--bundle", "run/nodes/a100-0.intoto.jsonl", "--key", "rel.pub", "--allow-simulated")
	if code != exitPolicy || !strings.Contains(out, "FAIL job h100-0 (class h100): missing") || !regexp.MustCompile(`(?m)^  a100-0 +a100 +[0-9]+ +node1 +passed`).MatchString(out) {
		t.Errorf("verify --bundle without h100-0's bundle: exit %d, want %d naming the job\n%s", code, exitPolicy, out)
	}
	// A node bundle re-signed with the release key counts for no job.
	resigned := resignNode(t, dir, "run/nodes/h100-0.intoto.jsonl", "rel.key")
	code, out = fleetCLI(t, dir, "verify", "--bundle", "run/dispatch.intoto.jsonl", "--bundle", "run/nodes/a100-0.intoto.jsonl", "--bundle", resigned, "--key", "rel.pub", "--allow-simulated")
	if code != exitPolicy || !strings.Contains(out, "FAIL job h100-0 (class h100): missing") || !strings.Contains(out, "not signed by the key the dispatch delegated to it") {
		t.Errorf("verify --bundle with h100-0's bundle re-signed by the release key: exit %d, want %d\n%s", code, exitPolicy, out)
	}
	// A node bundle duplicated counts twice for its job (exit 12).
	b, err := os.ReadFile(filepath.Join(dir, "run", "nodes", "a100-0.intoto.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "run", "nodes", "copy.intoto.jsonl"), string(b))
	code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated")
	if code != exitPolicy || !strings.Contains(out, "job a100-0 (class a100): duplicate") {
		t.Errorf("verify with a100-0's bundle duplicated: exit %d, want %d naming the job\n%s", code, exitPolicy, out)
	}
	if err := os.Remove(filepath.Join(dir, "run", "nodes", "copy.intoto.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "run", "nodes", "h100-0.intoto.jsonl")); err != nil {
		t.Fatal(err)
	}
	code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated")
	if code != exitPolicy || !strings.Contains(out, "job h100-0 (class h100): missing") {
		t.Errorf("verify with h100-0's bundle removed: exit %d, want %d naming the job\n%s", code, exitPolicy, out)
	}
}

// TestFleetNodeFailuresAreNamed: the a100 node fails the step's memory
// preflight (a simulated A100 has 40 GB), and a staged file changed on the
// shared directory before the h100 job starts makes that job refuse to
// run; both sign bundles that say so and the release fails naming them.
func TestFleetNodeFailuresAreNamed(t *testing.T) {
	dir := fleetSetup(t)
	write(t, filepath.Join(dir, "proj", "p.yaml"), strings.Replace(fleetPipeline, "    gpu: true\n", "    gpu: true\n    memory: 60GiB\n", 1))
	// Hold the node's one h100 so the h100 job waits while the file changes.
	blocker, err := exec.Command("sbatch", "--parsable", "--gres=gpu:h100:1", "--output=/dev/null", "--wrap", "sleep 300").Output()
	if err != nil {
		t.Fatal(err)
	}
	code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q", "--detach")
	if code != 0 || !strings.Contains(out, "detached; collect it with: gpuattest fleet collect run") {
		t.Fatalf("run --fleet --detach: exit %d\n%s", code, out)
	}
	// The a100 job runs (and fails) first; the h100 one waits.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if done, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "jobs", "a100-0", "node.intoto.jsonl")); len(done) == 1 {
			break
		}
	}
	staged, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "work", "out", "kernels.fatbin"))
	if len(staged) != 1 {
		t.Fatalf("staged fatbin: %v", staged)
	}
	if err := os.Chmod(staged[0], 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, staged[0], "tampered\n")
	if err := exec.Command("scancel", strings.TrimSpace(string(blocker))).Run(); err != nil {
		t.Fatal(err)
	}
	code, out = fleetCLI(t, dir, "fleet", "collect", "run", "--timeout", "2m")
	if code != exitFailed {
		t.Errorf("collect: exit %d, want %d\n%s", code, exitFailed, out)
	}
	for _, want := range []string{
		"fleet dispatch: FAILED",
		"FAIL job a100-0 (class a100): failed: on node node1: step check",
		"FAIL job h100-0 (class h100): failed: on node node1: refusing to run: staged file work/out/kernels.fatbin has sha256",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("collect output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "GiB") {
		t.Errorf("the a100 failure does not say what preflight found:\n%s", out)
	}
	if code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated"); code != exitPolicy {
		t.Errorf("verify: exit %d, want %d\n%s", code, exitPolicy, out)
	}
	code, out = fleetCLI(t, dir, "report", "run", "--markdown", "-")
	if code != 0 || !strings.Contains(out, "gpuattest fleet-demo: FAILED") ||
		!regexp.MustCompile(`\| a100-0 \| a100 \| node1 \| [0-9]+ \| 1x [^|]*A100[^|]* \| \*\*failed\*\* \| on node node1: step check `).MatchString(out) ||
		!regexp.MustCompile(`\| h100-0 \| h100 \| node1 \| [0-9]+ \| [^|]* \| \*\*failed\*\* \| on node node1: refusing to run: staged file work/out/kernels.fatbin has sha256`).MatchString(out) {
		t.Errorf("report of the failed fleet: exit %d, want both nodes failed with their reasons\n%s", code, out)
	}
	host := registrytest.StartInProcess(t, nil)
	if code, out = fleetCLI(t, dir, "fleet", "push", "run", host+"/kernels:v1"); code != exitFailed || !strings.Contains(out, "refusing to push run: the release failed: job a100-0") {
		t.Errorf("push of a failed release: exit %d, want %d naming the failure\n%s", code, exitFailed, out)
	}
}

// copyToLayout copies the release ref names and its referrers from the
// registry into an OCI image layout in dir, as pull --to writes one.
func copyToLayout(t *testing.T, ref, dir string) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	add := func(r name.Reference) v1.Hash {
		desc, err := remote.Get(r)
		if err != nil {
			t.Fatal(err)
		}
		img, err := desc.Image()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WriteImage(img); err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendDescriptor(v1.Descriptor{MediaType: desc.MediaType, Size: desc.Size, Digest: desc.Digest, ArtifactType: m.ArtifactType}); err != nil {
			t.Fatal(err)
		}
		return desc.Digest
	}
	h := add(r)
	idx, err := remote.Referrers(r.Context().Digest(h.String()))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) == 0 {
		t.Fatalf("%s has no referrers", ref)
	}
	for _, d := range im.Manifests {
		add(r.Context().Digest(d.Digest.String()))
	}
}

// resignNode signs the statement of the node bundle file with the key in
// keyFile and writes it beside dir's run directory; it returns its path.
func resignNode(t *testing.T, dir, file, keyFile string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sign.UnverifiedStatement(bytes.TrimSpace(b))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.LoadPrivateKey(filepath.Join(dir, keyFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := s.Sign(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "resigned.intoto.jsonl")
	if err := sign.WriteJSONL(out, [][]byte{nb}); err != nil {
		t.Fatal(err)
	}
	return "resigned.intoto.jsonl"
}

// fleetState reads the coordinator's record in dir/run.
func fleetState(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "run", "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// jobID is the Slurm job ID of job name in the coordinator's record.
func jobID(t *testing.T, dir, name string) string {
	t.Helper()
	for _, j := range fleetState(t, dir)["jobs"].([]any) {
		if m := j.(map[string]any); m["name"] == name {
			return m["id"].(string)
		}
	}
	t.Fatalf("no job %s in the fleet record", name)
	return ""
}

// waitForStep waits (1 minute at most) until job name of the dispatch
// under dir/shared reports running step.
func waitForStep(t *testing.T, dir, name, step string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "jobs", name, "step"))
		if len(files) == 1 {
			if b, _ := os.ReadFile(files[0]); strings.TrimSpace(string(b)) == step {
				return
			}
		}
	}
	t.Fatalf("job %s never ran step %s", name, step)
}

// TestFleetInterruptCancelsTheJobs runs the coordinator as a process,
// sends it SIGINT while its jobs run, and checks that it cancelled them
// (squeue is empty) and left the run directory not collected.
func TestFleetInterruptCancelsTheJobs(t *testing.T) {
	dir := fleetSetup(t)
	write(t, filepath.Join(dir, "proj", "p.yaml"), strings.Replace(fleetPipeline, "run: ./out/harness && test", "run: sleep 120 && ./out/harness && test", 1))
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
	cmd := exec.Command(bin, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	waitForStep(t, dir, "a100-0", "check")
	waitForStep(t, dir, "h100-0", "check")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("the coordinator did not exit within a minute of SIGINT\n%s", out.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(out.String(), "interrupted: the dispatch's 2 job(s) were cancelled") {
		t.Errorf("coordinator: %v, want exit %d saying the jobs were cancelled\n%s", err, exitInterrupted, out.String())
	}
	var queued string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b, err := exec.Command("squeue", "-h", "-o", "%i %T").Output()
		if queued = strings.TrimSpace(string(b)); err == nil && queued == "" {
			break
		}
	}
	if queued != "" {
		t.Errorf("squeue after the interrupt still lists:\n%s", queued)
	}
	if st := fleetState(t, dir); st["done"] != false {
		t.Errorf("fleet record done = %v after an interrupt, want false", st["done"])
	}
	// report of the uncollected run: the jobs' last known states.
	code, rout := fleetCLI(t, dir, "report", "run", "--markdown", "-")
	if code != 0 || !strings.Contains(rout, "gpuattest fleet-demo: NOT COLLECTED") || !strings.Contains(rout, "**not collected**") ||
		!regexp.MustCompile(`\| a100-0 \| a100 \| [^|]+ \| [0-9]+ \| – \| \*\*[a-z]+\*\* \|`).MatchString(rout) {
		t.Errorf("report of an interrupted fleet run: exit %d, want the jobs' last states, not collected\n%s", code, rout)
	}
	if _, err := os.Stat(filepath.Join(dir, "run", "nodes")); !os.IsNotExist(err) {
		t.Errorf("run/nodes exists after an interrupt (%v): nothing was collected", err)
	}
	if keys, _ := filepath.Glob(filepath.Join(dir, "shared", "*", "keys", "*.key")); len(keys) != 0 {
		t.Errorf("job keys left after the jobs were cancelled: %v", keys)
	}
}

// TestFleetVerifyUsage: verify needs the owner's key or identity, and a
// run directory of a fleet run; bad input is exit 2 with a hint.
func TestFleetVerifyUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "verify", dir}, "no verification material"},
		{[]string{"fleet", "verify", dir, "--key", "k.pub", "--certificate-identity", "a@b"}, "exclusive"},
		{[]string{"fleet", "verify", dir, "--certificate-identity", "a@b"}, "needs both an identity"},
		{[]string{"fleet", "collect", dir}, "is " + dir + " the run directory of a run --fleet?"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if code := execute(tt.args, strings.NewReader(""), &out, &out); code != exitUsage || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", tt.args, code, exitUsage, tt.want, out.String())
		}
	}
}

// TestFleetNodeNeedsDispatchDigest: fleet node refuses to run a dispatch
// directory without the digest the job script pins (issue 30, item 1).
func TestFleetNodeNeedsDispatchDigest(t *testing.T) {
	t.Setenv(fleet.IndexEnv, "0")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"fleet", "node", dir, "a100"},
		{"fleet", "node", "--dispatch-digest", "sha256:abc", dir, "a100"},
		{"fleet", "node", "--dispatch-digest", strings.Repeat("a", 64), dir, "a100"},
	} {
		var out bytes.Buffer
		if code := execute(args, strings.NewReader(""), &out, &out); code != exitUsage || !strings.Contains(out.String(), "--dispatch-digest") {
			t.Errorf("%v: exit %d, want %d naming --dispatch-digest\n%s", args, code, exitUsage, out.String())
		}
	}
}

// TestFleetUnsandboxedHostSteps: with hostSteps: unsandboxed the node runs
// the host-runner step with no sandbox, so the step that probes for the
// job key finds it (the probe works: the sandbox is what keeps the key
// from it) and fails; each node statement records sandbox: none, which
// verify prints.
func TestFleetUnsandboxedHostSteps(t *testing.T) {
	dir := fleetSetup(t)
	fleetYAML := filepath.Join(dir, "fleet.yaml")
	b, err := os.ReadFile(fleetYAML)
	if err != nil {
		t.Fatal(err)
	}
	write(t, fleetYAML, strings.Replace(string(b), "\nclasses:\n", "\nhostSteps: unsandboxed\nclasses:\n", 1))
	code, out := fleetCLI(t, dir, "run", "proj/p.yaml", "--fleet", "fleet.yaml", "--key", "rel.key", "--out", "run", "--simulate-gpus", "-q", "--timeout", "2m")
	if code != exitFailed || !strings.Contains(out, "FAIL job a100-0 (class a100): failed: on node node1: step check") {
		t.Fatalf("run --fleet with hostSteps: unsandboxed: exit %d, want %d with the key-probing step failed\n%s", code, exitFailed, out)
	}
	code, out = fleetCLI(t, dir, "fleet", "verify", "run", "--key", "rel.pub", "--allow-simulated")
	if code != exitPolicy {
		t.Errorf("verify: exit %d, want %d\n%s", code, exitPolicy, out)
	}
	for _, job := range []string{"a100-0", "h100-0"} {
		if !regexp.MustCompile(`(?m)^  ` + job + ` .* failed +simulated +host steps sandbox: none$`).MatchString(out) {
			t.Errorf("verify does not list job %s as failed with its host steps unsandboxed:\n%s", job, out)
		}
	}
	// What the owner signed, beside what each node says (issue 30, item 11).
	if !strings.Contains(out, "host steps: UNSANDBOXED, as the owner signed (hostSteps: unsandboxed)") {
		t.Errorf("verify does not print the hostSteps setting the owner signed:\n%s", out)
	}
}
