package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/rundir"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Config is what the node side needs besides the dispatch directory.
type Config struct {
	// Dir is the dispatch directory; Job the job's name (CLASS-INDEX).
	Dir string
	Job string
	// DispatchDigest is the sha256 digest ("sha256:<hex>") of the
	// dispatch file, as the job script pins it: Run refuses a
	// dispatch file with any other.
	DispatchDigest string
	// Engine, JobID and NodeName are the scheduler (the dispatch's when
	// empty), its job ID and the node's name ($SLURM_JOB_ID and
	// $SLURMD_NODENAME on Slurm).
	Engine   string
	JobID    string
	NodeName string
	// GPUSource is where the hardware record comes from.
	GPUSource gpu.Source
	// Simulate replaces GPUSource with GPUs simulated from the job's gres
	// type (GPUATTEST_FAKE_GPU=TYPE:N, N reaching the highest device in
	// CUDA_VISIBLE_DEVICES), labelled simulated.
	Simulate bool
	// Env is the environment the steps start from.
	Env []string
	// Version is gpuattest's version.
	Version string
	// Logger receives the run's log.
	Logger *slog.Logger
	// BwrapOptions set the bwrap the host-runner steps are sandboxed
	// with (its binary).
	BwrapOptions []runner.BwrapOption

	// sandbox is set by Run: the steps on the host runner run in a
	// runner.Sandbox that hides the shared directory (Slurm), unless the
	// dispatch says hostSteps: unsandboxed. On Kubernetes (Report)
	// the node container is their sandbox, and the statement says
	// nothing (podSandbox).
	sandbox    bool
	podSandbox bool
	// trusted is the checked dispatch directory and binding the MAC that
	// binds the job's run directory to the job (Run); nil on
	// Kubernetes, where the pod's own volume holds the run.
	trusted *stagefs.TrustedDir
	binding []byte
}

// Result is what the node signed.
type Result struct {
	// Bundle is the node bundle's path.
	Bundle string
	// Node is the signed predicate.
	Node *dispatch.Node
}

// ErrNodeFailed is wrapped by Run's error when the node signed a
// bundle that says it failed (preflight, a step, a staged file).
var ErrNodeFailed = errors.New("the node failed")

// Run is the node side of a job on a shared directory (Slurm): it
// reads the dispatch and its job's key, copies the staged work tree into
// the job's own directory checking every file against the dispatch's
// digest, runs the pipeline's GPU part there (resuming its run directory
// after a requeue), signs the node bundle with the job key and deletes
// the key. A node that fails still signs a bundle that says why, and
// Run returns ErrNodeFailed. (On Kubernetes, Report and Sign
// split this between two containers; only the transport differs.)
func Run(ctx context.Context, n Config) (*Result, error) {
	if !strings.HasPrefix(n.DispatchDigest, "sha256:") {
		return nil, errors.New("no digest of the dispatch file to check it against: refusing to run\nhint: the fleet's job script pins it (fleet node --dispatch-digest sha256:...); run the node through job.sh")
	}
	// Nothing is read from the shared directory before it is checked: no
	// one but this job's user may be able to replace the dispatch
	// directory, or anything in it the node uses.
	td, err := stagefs.OpenTrusted(n.Dir)
	if err != nil {
		return nil, err
	}
	defer td.Close()
	given := n.Dir
	n.Dir, n.trusted = td.RealPath, td
	data, _, err := td.ReadFile(stagefs.DispatchFile, 64<<20, "the dispatch", 0o022)
	if err != nil {
		return nil, fmt.Errorf("reading the dispatch: %w", err)
	}
	if got := stagefs.DigestOf(data); got != n.DispatchDigest {
		return nil, fmt.Errorf("refusing to run: the dispatch file %s is %s, the job script names %s: it changed on the shared directory", td.Path(stagefs.DispatchFile), got, n.DispatchDigest)
	}
	l, err := parseDispatch(data, n.Job)
	if err != nil {
		return nil, err
	}
	// The key is read now, before anything runs; the node holds it in
	// memory and the file stays, outside every directory a step is given,
	// only so that a requeued job can sign.
	keyName := stagefs.KeysDir + "/" + l.job.Name + ".key"
	pemKey, fi, err := td.ReadFile(keyName, 64<<10, "the job key", 0o077)
	if err != nil {
		return nil, fmt.Errorf("the job key: %w\nhint: a job key is deleted when its job ends; a job runs once per dispatch", err)
	}
	keyPath := td.Path(keyName)
	if fi.Mode().Perm()&0o077 != 0 || stagefs.OwnerOf(fi) != td.UID {
		return nil, fmt.Errorf("the job key %s is readable by others (%v) or not %s's: refusing it", keyPath, fi.Mode().Perm(), stagefs.UserName(td.UID))
	}
	signer, err := jobSigner(pemKey, keyPath, l.job)
	if err != nil {
		return nil, err
	}
	if err := td.Dir("jobs/"+l.job.Name, 0o022); err != nil {
		return nil, err
	}
	n.binding = runBinding(pemKey, l)
	n.sandbox = l.d.Fleet.HostSteps != dispatch.HostStepsUnsandboxed
	if given != td.RealPath { // the steps' environment names neither path
		n.Env = withoutKey(n.Env, filepath.Join(given, stagefs.KeysDir), filepath.Join(given, "jobs", l.job.Name))
	}
	pred, runErr, err := n.execute(ctx, l, keyPath)
	if err != nil {
		return nil, err
	}
	b, err := signNode(ctx, signer, l, pred)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(n.Dir, "jobs", l.job.Name, stagefs.NodeFile)
	if err := sign.WriteJSONL(out, [][]byte{b}); err != nil {
		return nil, err
	}
	// The job has ended: its key goes.
	if err := td.Root.Remove(keyName); err != nil {
		return nil, fmt.Errorf("deleting the job key: %w", err)
	}
	res := &Result{Bundle: out, Node: pred}
	if runErr != nil {
		return res, fmt.Errorf("%w: job %s on %s: %w", ErrNodeFailed, l.job.Name, n.NodeName, runErr)
	}
	return res, nil
}

// loaded is a dispatch as a node read it, unverified: the node checks
// only that its key is the one the dispatch delegated to its job, and
// verify checks the owner's signature.
type loaded struct {
	stmt   *attest.Statement
	d      *dispatch.Dispatch
	job    *dispatch.Job
	digest string
}

// loadDispatch reads the dispatch file at path and finds job in it.
func loadDispatch(path, job string) (*loaded, error) {
	data, err := limits.ReadFile(path, 64<<20, "dispatch")
	if err != nil {
		return nil, err
	}
	return parseDispatch(data, job)
}

// parseDispatch reads the dispatch file data and finds job in it.
func parseDispatch(data []byte, job string) (*loaded, error) {
	var err error
	l := &loaded{}
	if l.stmt, err = sign.UnverifiedStatement(data); err != nil {
		return nil, fmt.Errorf("reading the dispatch: %w", err)
	}
	if l.d, err = dispatch.Decode(l.stmt); err != nil {
		return nil, err
	}
	if l.job = l.d.Job(job); l.job == nil {
		return nil, fmt.Errorf("the dispatch %s has no job %q", l.d.ID, job)
	}
	if l.digest, err = dispatch.Digest(l.stmt); err != nil {
		return nil, err
	}
	return l, nil
}

// execute runs the job in its directory and returns the predicate to
// sign and why the node failed (nil when it passed); the error is for a
// cancelled or preempted job, which signs nothing (a requeue resumes).
// keyPath is where the job key is, which no step may name.
func (n *Config) execute(ctx context.Context, l *loaded, keyPath string) (*dispatch.Node, error, error) {
	if n.Logger == nil {
		n.Logger = slog.New(slog.DiscardHandler)
	}
	if n.Engine == "" {
		n.Engine = l.d.Fleet.Engine
	}
	pred := &dispatch.Node{Dispatch: l.digest, Job: l.job.Name, Nonce: l.job.Nonce, Engine: n.Engine, JobID: n.JobID, NodeName: n.NodeName, Arch: runtime.GOARCH,
		StartedAt: time.Now().UTC(), Steps: []dispatch.Step{}}
	runErr := n.run(ctx, l.d, l.job, filepath.Join(n.Dir, "jobs", l.job.Name), keyPath, pred)
	pred.FinishedAt = time.Now().UTC()
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("job %s stopped: %w", l.job.Name, ctx.Err())
	}
	pred.Result = dispatch.ResultPassed
	if runErr != nil {
		pred.Result, pred.Reason = dispatch.ResultFailed, runErr.Error()
	}
	return pred, runErr, nil
}

// signNode signs pred as the node statement of l's job.
func signNode(ctx context.Context, signer *sign.Signer, l *loaded, pred *dispatch.Node) ([]byte, error) {
	node, err := pred.Statement(l.stmt.Subject)
	if err != nil {
		return nil, err
	}
	b, err := signer.Sign(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("signing the node bundle: %w", err)
	}
	return b, nil
}

// loadJobKey reads the job key at path (Kubernetes: the sign
// container's mount), refusing one others can read.
func loadJobKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("the job key: %w\nhint: a job key is deleted when its job ends; a job runs once per dispatch", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the job key %s is readable by others (%v): refusing it", path, fi.Mode().Perm())
	}
	return limits.ReadFile(path, 64<<10, "job key")
}

// jobSigner parses the job's key (pemKey, read from path) and checks it
// is the one the dispatch delegated to the job.
func jobSigner(pemKey []byte, path string, job *dispatch.Job) (*sign.Signer, error) {
	kp, err := sign.ParsePrivateKey(pemKey, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(job.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("the dispatch's key of job %s: %w", job.Name, err)
	}
	want, ok := pub.(*ecdsa.PublicKey)
	if !ok || !want.Equal(kp.GetPublicKey()) {
		return nil, fmt.Errorf("the key in %s is not the one the dispatch delegated to job %s", path, job.Name)
	}
	return sign.NewKeySigner(kp)
}

// run copies and checks the staged files, then runs the GPU steps; an
// error says why the node failed.
func (n *Config) run(ctx context.Context, d *dispatch.Dispatch, job *dispatch.Job, jdir, keyPath string, pred *dispatch.Node) error {
	if job.Arch != "" && job.Arch != runtime.GOARCH {
		return fmt.Errorf("refusing to run: this gpuattest is built for %s, class %s's arch is %s\nhint: the class's nodes run a gpuattest for linux/%s (its --node-binary, or its image's platform)", runtime.GOARCH, job.Class, job.Arch, job.Arch)
	}
	// On Kubernetes the dispatch names the job script (the node
	// container's command, staged with it); on a shared directory
	// sbatch's own copy ran, which pinned this dispatch.
	if d.JobScript != "" {
		if b, err := limits.ReadFile(filepath.Join(n.Dir, stagefs.JobScript), 64<<10, "job script"); err != nil || stagefs.DigestOf(b) != d.JobScript {
			return fmt.Errorf("refusing to run: the job script %s is not the one the dispatch names (%s)", filepath.Join(n.Dir, stagefs.JobScript), d.JobScript)
		}
	}
	work := filepath.Join(jdir, "work")
	if err := checkedCopy(n.Dir, work, d.Staged); err != nil {
		return fmt.Errorf("refusing to run: %w", err)
	}
	path := filepath.Join(work, filepath.FromSlash(d.Pipeline.Path))
	p, err := pipeline.Load(path, pipeline.WithRoot(work))
	if err != nil {
		return fmt.Errorf("loading the staged pipeline: %w", err)
	}
	if p.Digest != d.Pipeline.Digest {
		return fmt.Errorf("refusing to run: the staged pipeline is %s, the dispatch names %s", p.Digest, d.Pipeline.Digest)
	}
	if err := run.CheckSigningFiles(p, map[string]string{"the job key": keyPath}); err != nil {
		return err
	}
	_, gp := coordinate.Split(p)
	if len(gp.Steps) == 0 {
		return errors.New("the pipeline has no gpu: true step to run on a node")
	}
	src := n.GPUSource
	if n.Simulate {
		if src, err = simulated(job, n.Env); err != nil {
			return err
		}
	}
	runDir := filepath.Join(jdir, "run")
	env, err := stepEnv(n.Env, filepath.Dir(keyPath), jdir)
	if err != nil {
		return err
	}
	opts := []run.Option{run.WithGPUSource(src), run.WithBaseEnv(env), run.WithLogger(n.Logger),
		run.WithProgress(stepWriter(filepath.Join(jdir, stagefs.StepFile))), run.WithFleetNonce(pred.Dispatch, pred.Job)}
	if slices.ContainsFunc(gp.Steps, func(s pipeline.Step) bool { return s.Runner == pipeline.DefaultRunner }) {
		o, err := n.hostSandbox(ctx, work, filepath.Join(jdir, "home"), pred)
		if err != nil {
			return err
		}
		opts = append(opts, o...)
	}
	if n.Version != "" {
		opts = append(opts, run.WithVersion(n.Version))
	}
	resume, err := n.resumable(job, runDir)
	if err != nil {
		return err
	}
	if resume {
		opts = append(opts, run.WithResume(runDir)) // requeued after preemption
	} else {
		opts = append(opts, run.WithOutDir(runDir))
	}
	res, err := run.Pipeline(ctx, gp, opts...)
	if res != nil && res.Dir != "" {
		describe(res.Dir, pred)
	}
	if err != nil {
		return err
	}
	if !res.Passed() {
		return errors.New(failure(res.Record))
	}
	return nil
}

// hostSandbox records in pred how the host-runner steps run and returns
// the run option that sandboxes them: a runner.Sandbox in the host
// runner's place, writing only the work tree, with the GPU device nodes
// bound and the shared directory (every dispatch's keys) hidden but for
// the work tree and home, an empty scratch directory. A sandbox that
// cannot start fails the node, naming the opt-out; it never runs the
// steps unsandboxed.
func (n *Config) hostSandbox(ctx context.Context, work, home string, pred *dispatch.Node) ([]run.Option, error) {
	if n.podSandbox {
		return nil, nil // the node container holds no key
	}
	if !n.sandbox {
		pred.Sandbox = dispatch.SandboxNone
		return nil, nil
	}
	hide := []string{n.Dir}
	if shared := filepath.Dir(n.Dir); shared != "/" {
		hide = []string{shared} // the fleet's sharedDir: other dispatches' keys too
	}
	sb, err := runner.NewSandbox([]string{work}, runner.WithSandboxHidden(append(hide, home)...), runner.WithSandboxGPU(""), runner.WithSandboxBwrap(n.BwrapOptions...))
	if err == nil {
		err = sb.Check(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("refusing to run the host-runner steps unsandboxed: %w\nhint: the node runs them under bubblewrap so that no step can read a job key; install bubblewrap and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces), or set hostSteps: unsandboxed in the fleet file, which the node statements then record as sandbox: none", err)
	}
	pred.Sandbox = dispatch.SandboxBwrap
	return []run.Option{run.WithRunners(sb)}, nil
}

// simulated is the simulated GPU source of a job: its gres type (its
// GPU model without one), as
// many devices as CUDA_VISIBLE_DEVICES reaches (the job's GPU count
// without it).
func simulated(job *dispatch.Job, env []string) (gpu.Source, error) {
	typ := strings.ToLower(job.GPUModel)
	if parts := strings.Split(job.Gres, ":"); len(parts) == 3 {
		typ = parts[1]
	}
	count := job.GPUs
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CUDA_VISIBLE_DEVICES="); ok {
			for _, f := range strings.Split(v, ",") {
				if i, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && i+1 > count {
					count = i + 1
				}
			}
		}
	}
	src, err := gpu.SourceFromEnv(fmt.Sprintf("%s:%d", typ, count))
	if err != nil {
		return nil, fmt.Errorf("simulating the GPUs of class %s: %w", job.Class, err)
	}
	return src, nil
}

// describe reads the node's run directory into pred: the hardware record
// and each step's outcome.
func describe(dir string, pred *dispatch.Node) {
	rd, err := rundir.Open(dir)
	if err != nil {
		return
	}
	pred.Hardware = rd.Hardware
	pred.Simulated = rd.Hardware != nil && rd.Hardware.Simulated
	pred.Attempts = len(rd.Record.Attempts)
	pred.GPUEvidence = dispatch.NodeEvidence(rd.Record.GPUEvidence)
	for _, s := range rd.Record.Steps {
		st := dispatch.Step{ID: s.ID, Kind: s.Kind, State: string(s.State), Reason: stagefs.FirstLine(s.Reason), DurationMS: s.DurationMS, Telemetry: s.Telemetry}
		for _, f := range s.Results {
			st.Results = append(st.Results, dispatch.Result{Path: f.Path, SHA256: f.SHA256})
		}
		pred.Steps = append(pred.Steps, st)
	}
}

// failure says which steps failed and why.
func failure(rec *engine.Record) string {
	var parts []string
	for _, s := range rec.Steps {
		if s.State != runtypes.Passed {
			parts = append(parts, fmt.Sprintf("step %s %s: %s", s.ID, s.State, stagefs.FirstLine(s.Reason)))
		}
	}
	if len(parts) == 0 {
		return "run " + string(rec.State) + ": " + stagefs.FirstLine(rec.Reason)
	}
	return strings.Join(parts, "; ")
}

// checkedCopy copies every staged file from the dispatch directory into
// work, checking each copy's digest against the dispatch: a file changed
// on the shared directory refuses the job.
func checkedCopy(dir, work string, files []dispatch.File) error {
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	for _, f := range files {
		rel, ok := strings.CutPrefix(f.Path, "work/")
		if !ok {
			continue
		}
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return fmt.Errorf("staged path %q leaves the work tree", f.Path)
		}
		sum, _, err := stagefs.CopyFile(filepath.Join(dir, filepath.FromSlash(f.Path)), filepath.Join(work, filepath.FromSlash(rel)), os.FileMode(f.Mode)|0o400, stagefs.MaxStagedBytes)
		if err != nil {
			return fmt.Errorf("staged file %s: %w", f.Path, err)
		}
		if sum != f.SHA256 {
			return fmt.Errorf("staged file %s has sha256 %s, the dispatch names %s: it changed on the shared directory", f.Path, sum, f.SHA256)
		}
	}
	return nil
}

// stepEnv is the environment the steps start from: env without any
// variable that names the keys' directory or the job's, and with HOME
// moved to jdir/home when the keys' directory lies inside it (a shared
// home directory), so that no step finds a key under $HOME.
func stepEnv(env []string, keys, jdir string) ([]string, error) {
	out := withoutKey(env, keys, jdir)
	for i, kv := range out {
		home, ok := strings.CutPrefix(kv, "HOME=")
		if !ok || home == "" {
			continue
		}
		if rel, err := filepath.Rel(home, keys); err == nil && filepath.IsLocal(rel) {
			h := filepath.Join(jdir, "home")
			if err := os.MkdirAll(h, 0o700); err != nil {
				return nil, err
			}
			out[i] = "HOME=" + h
		}
	}
	return out, nil
}

// withoutKey drops every variable that names the job key or its
// directory.
func withoutKey(env []string, paths ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		named := false
		for _, p := range paths {
			named = named || strings.Contains(v, p)
		}
		if !named {
			out = append(out, kv)
		}
	}
	return out
}

// stepWriter records the step in progress in file, for the
// coordinator's progress lines.
func stepWriter(file string) func(runtypes.Event) {
	return func(e runtypes.Event) {
		if e.Type == "start" {
			_ = atomicfile.Write(file, []byte(e.Step+"\n"), 0o644)
		}
	}
}

// BindingFile is the file, beside a job's run directory
// (jobs/<job>/run.binding), whose MAC binds the run directory to the job:
// a requeued job resumes only a run directory its own job started.
const BindingFile = "run.binding"

// runBinding is the MAC that binds a job's run directory to the job:
// HMAC-SHA256, keyed by the job's private key (pemKey), over the
// dispatch's digest, the job's name and its nonce. No one who cannot
// read the job key can make it, and a run directory of another job or
// dispatch carries another.
func runBinding(pemKey []byte, l *loaded) []byte {
	m := hmac.New(sha256.New, pemKey)
	fmt.Fprintf(m, "gpuattest fleet run directory v1\ndispatch %s\njob %s\nnonce %s\n", l.digest, l.job.Name, l.job.Nonce)
	return []byte(hex.EncodeToString(m.Sum(nil)) + "\n")
}

// resumable reports whether the node resumes the run in runDir (a
// requeued job): only when it holds a run record and the job's own
// binding, checked, all of it the job's user's and no link. A fresh run
// first writes the binding. Without a binding (Kubernetes: the pod's own
// volume) a run record alone resumes.
func (n *Config) resumable(job *dispatch.Job, runDir string) (bool, error) {
	_, err := os.Lstat(runlayout.Record(runDir))
	exists := err == nil
	if n.trusted == nil || n.binding == nil {
		return exists, nil
	}
	jdir := "jobs/" + job.Name
	if !exists {
		if err := atomicfile.Write(n.trusted.Path(jdir+"/"+BindingFile), n.binding, 0o600); err != nil {
			return false, fmt.Errorf("binding the run directory to the job: %w", err)
		}
		return false, nil
	}
	refuse := func(why string) error {
		return fmt.Errorf("refusing to resume the run in %s: %s\nhint: a requeued job resumes only the run its own job started; remove %s to run the job afresh", runDir, why, runDir)
	}
	if err := n.trusted.Dir(jdir+"/run", 0o022); err != nil {
		return false, refuse(stagefs.FirstLine(err.Error()))
	}
	if fi, err := n.trusted.Root.Lstat(jdir + "/run/" + filepath.Base(runlayout.Record(runDir))); err != nil || !fi.Mode().IsRegular() || stagefs.OwnerOf(fi) != n.trusted.UID {
		return false, refuse("its run record is not a regular file of the job's user")
	}
	b, _, err := n.trusted.ReadFile(jdir+"/"+BindingFile, 4096, "the run's binding", 0o022)
	if err != nil {
		return false, refuse("it carries no binding to this job (" + stagefs.FirstLine(err.Error()) + ")")
	}
	if !hmac.Equal(b, n.binding) {
		return false, refuse("its binding is not this job's (another job's or dispatch's run, or one forged)")
	}
	return true, nil
}
