package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
	"github.com/gpuattest/gpuattest/internal/testenv"
)

// evidencePipeline builds a kernel with nvcc, then runs a gpu: true step:
// the GPUs are asked for their evidence before it, over a nonce bound to
// the run and the built fatbin.
const evidencePipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: evidence
targets: [sm_90]
requireGPUEvidence: %REQUIRE%
steps:
  - id: build
    kind: cuda-build
    sources: [k.cu]
  - id: on-gpu
    needs: [build]
    gpu: true
    run: "true"
`

// evidencePolicy requires every GPU device-signed: the policy sees the
// verifier's verdict on each GPU as gpuEvidence.
const evidencePolicy = `apiVersion: gpuattest.dev/v1
kind: Policy
rules:
  - name: every GPU device-signed
    expr: size(gpuEvidence) > 0 && gpuEvidence.all(g, g.device_signed && g.status != "unattested")
    message: each GPU signed its evidence with its device key
`

// evidenceRun is a directory with a key pair, a simulated GPU's test PKI
// and the pipeline, and runs this test binary as gpuattest in it.
type evidenceRun struct {
	t       *testing.T
	dir     string
	bin     string
	gpuRoot string
}

func newEvidenceRun(t *testing.T, require bool) *evidenceRun {
	t.Helper()
	if _, err := exec.LookPath("nvcc"); err != nil {
		if testenv.InCI() {
			t.Fatal("CI=true but nvcc is not in PATH (hint: .ci/install installs it)")
		}
		t.Skip("nvcc not installed")
	}
	r := &evidenceRun{t: t, dir: t.TempDir(), bin: selfAsGpuattest(t)}
	ca, err := gpuevidencetest.NewCA(time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caDir := filepath.Join(r.dir, "ca")
	if err := os.Mkdir(caDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(caDir); err != nil {
		t.Fatal(err)
	}
	r.gpuRoot = filepath.Join(caDir, "gpu-root.pem")
	if err := os.Mkdir(filepath.Join(r.dir, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	req := strings.Replace(evidencePipeline, "%REQUIRE%", map[bool]string{true: "true", false: "false"}[require], 1)
	write(t, filepath.Join(r.dir, "proj", "p.yaml"), req)
	write(t, filepath.Join(r.dir, "signed.yaml"), evidencePolicy)
	write(t, filepath.Join(r.dir, "proj", "k.cu"), "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n")
	if code, out := r.gpuattest(nil, "key", "generate", "--output-key-prefix", "rel", "--no-password"); code != 0 {
		t.Fatalf("key generate: exit %d\n%s", code, out)
	}
	return r
}

// gpuattest runs the CLI in r.dir with the simulated H100s (and, with
// ca, their test PKI) and returns its exit code and output.
func (r *evidenceRun) gpuattest(env []string, args ...string) (int, string) {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.dir, "XDG_CACHE_HOME=" + filepath.Join(r.dir, ".cache"), "GPUATTEST_PASSWORD="}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return code, out.String()
}

// simulated is the environment of a run on two simulated H100s, signing
// their evidence under the test PKI when ca is true.
func (r *evidenceRun) simulated(ca bool) []string {
	env := []string{"GPUATTEST_FAKE_GPU=h100:2"}
	if ca {
		env = append(env, "GPUATTEST_FAKE_GPU_CA="+filepath.Join(r.dir, "ca"))
	}
	return env
}

// TestRunGPUEvidenceSimulated (issue 33 items 1, 2 and 6): a run on
// simulated H100s in CC mode stores each GPU's SPDM evidence, signed
// under a test PKI, over a nonce bound to the run; verify recomputes the
// nonce and passes only with --gpu-root at the test root, always saying
// SIMULATED; the evidence removed, or another run's, fails naming the
// GPU; without the PKI the GPUs are unattested and requireGPUEvidence
// fails the run.
func TestRunGPUEvidenceSimulated(t *testing.T) {
	t.Parallel()
	r := newEvidenceRun(t, true)
	code, out := r.gpuattest(r.simulated(true), "run", "proj/p.yaml", "--out", "run", "--key", "rel.key")
	if code != 0 || !strings.Contains(out, "GPU evidence: 2/2 collected (SIMULATED)") {
		t.Fatalf("run: exit %d, want 0 and 2/2 collected, SIMULATED\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "run", attest.GPUEvidenceFile)); err != nil {
		t.Errorf("no %s in the run directory: %v", attest.GPUEvidenceFile, err)
	}
	bundle := filepath.Join(r.dir, "run", "attestations.intoto.jsonl")
	verifyArgs := []string{"verify", "--bundle", bundle, "--key", "rel.pub", "--allow-simulated", "--require-gpu-evidence", "--policy", "signed.yaml"}
	code, out = r.gpuattest(nil, append(verifyArgs, "--gpu-root", r.gpuRoot)...)
	if code != 0 || !strings.Contains(out, "GPU evidence: 2/2 device-signed (SIMULATED") || !strings.Contains(out, "every GPU device-signed  holds") {
		t.Errorf("verify --gpu-root: exit %d, want 0 and 2/2 device-signed, SIMULATED\n%s", code, out)
	}
	// Offline means offline: the same verification in a network namespace
	// without interfaces (issue 33, acceptance 5).
	if unshare := offlinePrefix(t); unshare != nil {
		cmd := exec.Command(unshare[0], append(unshare[1:], "sh", "-c", "cat /proc/self/net/dev; echo ---; exec \"$0\" \"$@\"", r.bin)...)
		cmd.Args = append(cmd.Args, append(verifyArgs, "--gpu-root", r.gpuRoot)...)
		cmd.Dir = r.dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.dir}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "GPU evidence: 2/2 device-signed") || !strings.Contains(string(out), "Verified OK") {
			t.Errorf("verify inside %s: %v\n%s", strings.Join(unshare, " "), err, out)
		}
		if ifaces := netInterfaces(string(out)); len(ifaces) != 1 || ifaces[0] != "lo" {
			t.Errorf("the namespace has interfaces %v, want only its loopback", ifaces)
		}
	}

	// Without the test root, the simulated chain reaches no NVIDIA root.
	code, out = r.gpuattest(nil, verifyArgs...)
	if code != exitSig || !strings.Contains(out, "FAIL  gpu evidence") || !strings.Contains(out, "GPU-") {
		t.Errorf("verify without --gpu-root: exit %d, want %d and the GPUs named\n%s", code, exitSig, out)
	}

	// Another run of the same pipeline: its evidence answers its own
	// nonce (another run ID), not the first run's.
	if code, out := r.gpuattest(r.simulated(true), "run", "proj/p.yaml", "--out", "other", "--key", "rel.key"); code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, out)
	}
	first := r.statement(bundle)
	other := r.statement(filepath.Join(r.dir, "other", "attestations.intoto.jsonl"))
	var pred, otherPred map[string]json.RawMessage
	if err := json.Unmarshal(first.Predicate, &pred); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(other.Predicate, &otherPred); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		evidence json.RawMessage // nil: removed
		code     int
		want     string
	}{
		{"another run's evidence", otherPred["gpu_evidence"], exitSig, "nonce"},
		{"evidence removed", nil, exitPolicy, "the statement carries no GPU evidence"},
	} {
		p := map[string]json.RawMessage{}
		for k, v := range pred {
			p[k] = v
		}
		if tc.evidence == nil {
			delete(p, "gpu_evidence")
		} else {
			p["gpu_evidence"] = tc.evidence
		}
		signed := r.resign(first, p)
		code, out := r.gpuattest(nil, "verify", "--bundle", signed, "--key", "rel.pub", "--allow-simulated", "--require-gpu-evidence", "--policy", "signed.yaml", "--gpu-root", r.gpuRoot)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want %d and %q\n%s", tc.name, code, tc.code, tc.want, out)
		}
		if tc.evidence != nil && !strings.Contains(out, "GPU-") {
			t.Errorf("%s: the failure does not name the GPU\n%s", tc.name, out)
		}
	}

	// Without the PKI the simulated H100s are not in CC mode: unattested,
	// and requireGPUEvidence fails the GPU step, naming why.
	code, out = r.gpuattest(r.simulated(false), "run", "proj/p.yaml", "--out", "nocc")
	if code != exitFailed || !strings.Contains(out, "not in CC mode") {
		t.Errorf("run without CC mode: exit %d, want %d naming \"not in CC mode\"\n%s", code, exitFailed, out)
	}
}

// statement reads the validation statement of a JSON Lines bundle file.
func (r *evidenceRun) statement(file string) *attest.Statement {
	r.t.Helper()
	f, err := os.Open(file)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var b struct {
			DSSE struct {
				Payload string `json:"payload"`
			} `json:"dsseEnvelope"`
		}
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			r.t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(b.DSSE.Payload)
		if err != nil {
			r.t.Fatal(err)
		}
		var st attest.Statement
		if err := json.Unmarshal(raw, &st); err != nil {
			r.t.Fatal(err)
		}
		if st.PredicateType == attest.ValidationPredicateType {
			return &st
		}
	}
	r.t.Fatalf("%s holds no validation statement", file)
	return nil
}

// resign signs st with its predicate replaced by pred, with the run's
// key (a signer who edits what it signs), and returns the bundle file.
func (r *evidenceRun) resign(st *attest.Statement, pred map[string]json.RawMessage) string {
	r.t.Helper()
	raw, err := json.Marshal(pred)
	if err != nil {
		r.t.Fatal(err)
	}
	edited := *st
	edited.Predicate = raw
	data, err := json.Marshal(&edited)
	if err != nil {
		r.t.Fatal(err)
	}
	stFile, err := os.CreateTemp(r.dir, "statement-*.json")
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := stFile.Write(data); err != nil {
		r.t.Fatal(err)
	}
	stFile.Close()
	out := strings.TrimSuffix(stFile.Name(), ".json") + ".bundle.json"
	if code, o := r.gpuattest(nil, "sign", stFile.Name(), "--key", "rel.key", "--output", out); code != 0 {
		r.t.Fatalf("sign: exit %d\n%s", code, o)
	}
	return out
}

// offlinePrefix is the command that runs another in a new network
// namespace with no interface but its own loopback: unshare -n
// as root, unshare -rn (a user namespace) otherwise. Without either it
// skips, unless CI=true, where it fails.
func offlinePrefix(t *testing.T) []string {
	t.Helper()
	for _, p := range [][]string{{"unshare", "-n", "--"}, {"unshare", "-rn", "--"}} {
		if err := exec.Command(p[0], append(p[1:], "true")...).Run(); err == nil {
			return p
		}
	}
	if testenv.InCI() {
		t.Fatal("CI=true but neither unshare -n nor unshare -rn works here (hint: util-linux's unshare, and root or user namespaces)")
	}
	t.Log("skipping the offline verification: unshare -n and unshare -rn are unavailable")
	return nil
}

// netInterfaces lists the interfaces of the /proc/net/dev listing that
// out starts with (ended by a line "---").
func netInterfaces(out string) []string {
	dev, _, _ := strings.Cut(out, "\n---\n")
	var names []string
	for _, line := range strings.Split(dev, "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}
