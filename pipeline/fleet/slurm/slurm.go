package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
)

var _ fleet.Scheduler = (*Engine)(nil)

// DefaultPollInterval is the least time between two squeue calls when
// the fleet file gives no pollInterval (the coordinator spaces them with
// fleet.Throttle): a 64-job squeue --json costs about 40 ms of the
// controller's CPU.
const DefaultPollInterval = 10 * time.Second

// commandTimeout bounds each client command: a controller that does not
// answer must not hang the coordinator.
const commandTimeout = 60 * time.Second

// outputLimit bounds what is read from a client command (squeue --json
// of a busy cluster is a few MB).
const outputLimit = 64 << 20

// Engine submits jobs to a Slurm partition.
type Engine struct {
	partition string
	env       []string
	log       *slog.Logger
}

// Option configures New.
type Option func(*Engine) error

// WithEnv adds variables (KEY=VALUE) to the environment of every client
// command and so of every job (sbatch exports its environment): SLURM_CONF
// for a cluster other than the default one.
func WithEnv(env ...string) Option {
	return func(e *Engine) error {
		for _, kv := range env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return fmt.Errorf("slurm.WithEnv: %q is not KEY=VALUE", kv)
			}
		}
		e.env = append(e.env, env...)
		return nil
	}
}

// WithLogger logs each client command at debug level.
func WithLogger(l *slog.Logger) Option {
	return func(e *Engine) error {
		if l == nil {
			return errors.New("slurm.WithLogger: nil logger")
		}
		e.log = l
		return nil
	}
}

// New returns an engine that submits to partition (the cluster's default
// partition when empty).
func New(partition string, opts ...Option) (*Engine, error) {
	e := &Engine{partition: partition, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if err := opt(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Name returns "slurm".
func (e *Engine) Name() string { return "slurm" }

// Placement is the Slurm engine's own node selection of a class
// (fleet.Selectors.Placement): its constraint.
type Placement struct {
	// Constraint is a node feature expression (--constraint: sm_90);
	// empty for none.
	Constraint string
}

// constraint is the --constraint of sel: the class's feature expression
// and, when the class names its architecture, the node feature of that
// name (arm64), both required.
func constraint(sel fleet.Selectors) string {
	p, _ := sel.Placement.(Placement)
	switch {
	case sel.Arch == "":
		return p.Constraint
	case p.Constraint == "":
		return sel.Arch
	case strings.ContainsAny(p.Constraint, "|[*"):
		return "(" + p.Constraint + ")&" + sel.Arch
	}
	return p.Constraint + "&" + sel.Arch
}

// SbatchArgs returns the sbatch arguments of job index of req, without
// the environment (see Submit): it is what the dispatch records. req's
// Job is a fleet.ScriptJob (Submit refuses others).
func (e *Engine) SbatchArgs(req fleet.Request, index int) []string {
	job, _ := req.Job.(fleet.ScriptJob)
	args := []string{"--parsable", "--job-name=" + req.Name}
	if e.partition != "" {
		args = append(args, "--partition="+e.partition)
	}
	sel := req.Selectors
	args = append(args, fmt.Sprintf("--gres=gpu:%s:%d", sel.GPUType, sel.GPUs), "--nodes=1", "--ntasks=1")
	if c := constraint(sel); c != "" {
		args = append(args, "--constraint="+c)
	}
	if sel.Distinct {
		// Whole nodes: two jobs of the class cannot run on one node at
		// once; verify checks the node names are distinct.
		args = append(args, "--exclusive")
	}
	if req.Requeue {
		args = append(args, "--requeue")
	} else {
		args = append(args, "--no-requeue")
	}
	if req.TimeLimit > 0 {
		args = append(args, "--time="+FormatTime(req.TimeLimit))
	}
	if job.LogDir != "" {
		log := filepath.Join(job.LogDir, fmt.Sprintf("%s-%d-%%j.log", req.Class, index))
		args = append(args, "--output="+log, "--error="+log, "--open-mode=append")
	} else {
		// Not slurm-%j.out in whatever directory sbatch ran in.
		args = append(args, "--output=/dev/null", "--error=/dev/null")
	}
	args = append(args, job.Script)
	return append(args, job.Args...)
}

// FormatTime renders d as sbatch's --time, rounded up to a whole minute:
// days-hours:minutes:seconds.
func FormatTime(d time.Duration) string {
	s := int64((d + time.Minute - 1) / time.Minute * 60)
	return fmt.Sprintf("%d-%02d:%02d:%02d", s/86400, s%86400/3600, s%3600/60, s%60)
}

// Submit runs sbatch once per job of req; each job's environment carries
// req.Env and its index in fleet.IndexEnv. If one submission fails, the
// jobs already submitted are cancelled.
func (e *Engine) Submit(ctx context.Context, req fleet.Request) ([]fleet.Handle, error) {
	if req.Count < 1 {
		return nil, fmt.Errorf("submitting class %s: count %d, expected at least 1", req.Class, req.Count)
	}
	if req.Selectors.GPUType == "" || req.Selectors.GPUs < 1 {
		return nil, fmt.Errorf("submitting class %s: no GPU type or count\nhint: a class names its gres, such as gpu:h100:8", req.Class)
	}
	job, ok := req.Job.(fleet.ScriptJob)
	if !ok || job.Script == "" {
		return nil, fmt.Errorf("submitting class %s: a job of type %T, expected a fleet.ScriptJob with its script\nhint: Slurm runs a job script on the shared directory (sharedDir)", req.Class, req.Job)
	}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if req.Array && req.Count > 1 {
		return e.submitArray(ctx, req, job, keys)
	}
	var handles []fleet.Handle
	for i := range req.Count {
		env := make([]string, 0, len(keys)+1)
		for _, k := range keys {
			env = append(env, k+"="+req.Env[k])
		}
		env = append(env, fmt.Sprintf("%s=%d", fleet.IndexEnv, i))
		out, err := e.run(ctx, env, "sbatch", e.SbatchArgs(req, i)...)
		if err == nil {
			var id string
			if id, err = parseSbatch(out); err == nil {
				handles = append(handles, fleet.Handle{ID: id, Class: req.Class, Index: i})
				continue
			}
		}
		if len(handles) > 0 {
			ids := make([]string, len(handles))
			for j, h := range handles {
				ids[j] = h.ID
			}
			if cerr := e.Cancel(context.WithoutCancel(ctx), ids); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		return nil, fmt.Errorf("submitting job %d of class %s: %w", i, req.Class, err)
	}
	return handles, nil
}

// submitArray submits req as one array job (--array=0-N): a wrapper sets
// each task's index from SLURM_ARRAY_TASK_ID before it runs the script.
// The handles are Slurm's task IDs, JOB_TASK.
func (e *Engine) submitArray(ctx context.Context, req fleet.Request, job fleet.ScriptJob, keys []string) ([]fleet.Handle, error) {
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+req.Env[k])
	}
	args := e.SbatchArgs(req, 0)
	args = args[:len(args)-1-len(job.Args)] // the script and its arguments go into --wrap
	if job.LogDir != "" {
		for i, a := range args {
			if strings.HasPrefix(a, "--output=") || strings.HasPrefix(a, "--error=") {
				flag, _, _ := strings.Cut(a, "=")
				args[i] = flag + "=" + filepath.Join(job.LogDir, req.Class+"-%a-%A_%a.log")
			}
		}
	}
	wrap := fleet.IndexEnv + "=$SLURM_ARRAY_TASK_ID exec " + shellQuote(job.Script)
	for _, a := range job.Args {
		wrap += " " + shellQuote(a)
	}
	args = append(args, fmt.Sprintf("--array=0-%d", req.Count-1), "--wrap="+wrap)
	out, err := e.run(ctx, env, "sbatch", args...)
	if err != nil {
		return nil, fmt.Errorf("submitting class %s as an array: %w", req.Class, err)
	}
	id, err := parseSbatch(out)
	if err != nil {
		return nil, fmt.Errorf("submitting class %s as an array: %w", req.Class, err)
	}
	handles := make([]fleet.Handle, req.Count)
	for i := range handles {
		handles[i] = fleet.Handle{ID: fmt.Sprintf("%s_%d", id, i), Class: req.Class, Index: i}
	}
	return handles, nil
}

// shellQuote quotes s for sh: in single quotes, each single quote in s
// closing the quotes, escaped, and reopening them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// parseSbatch reads `sbatch --parsable`'s "ID" or "ID;CLUSTER".
func parseSbatch(out []byte) (string, error) {
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch printed %q, expected a job ID", truncate(string(out), 200))
	}
	return id, nil
}

// Status runs squeue --json and returns the state of each job in ids;
// one squeue no longer lists is Gone. Each call asks the controller:
// wrap the engine in fleet.Throttle to space them.
func (e *Engine) Status(ctx context.Context, ids []string) (map[string]fleet.Status, error) {
	args := []string{"--json"}
	if len(ids) > 0 {
		args = append(args, "--jobs="+strings.Join(baseIDs(ids), ","))
	}
	out, err := e.run(ctx, nil, "squeue", args...)
	if err != nil {
		// squeue -j with only unknown jobs fails ("Invalid job id
		// specified"); ask for every job instead and report them Gone.
		if out, err = e.run(ctx, nil, "squeue", "--json"); err != nil {
			return nil, err
		}
	}
	jobs, err := ParseSqueue(out)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]fleet.Status, len(jobs))
	for _, j := range jobs {
		byID[j.ID] = j
	}
	res := make(map[string]fleet.Status, len(ids))
	for _, id := range ids {
		if s, ok := byID[id]; ok {
			res[id] = s
		} else {
			res[id] = fleet.Status{ID: id, State: fleet.Gone, Reason: "squeue no longer lists the job"}
		}
	}
	return res, nil
}

// baseIDs are the distinct job IDs of ids, an array task JOB_TASK
// counting as JOB.
func baseIDs(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		base, _, _ := strings.Cut(id, "_")
		if !seen[base] {
			seen[base] = true
			out = append(out, base)
		}
	}
	return out
}

// Cancel runs scancel on ids.
func (e *Engine) Cancel(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := e.run(ctx, nil, "scancel", ids...)
	return err
}

// Signal sends sig (KILL, TERM, ...) to the running jobs ids with
// scancel --signal, without cancelling them: the tests preempt a job
// this way.
func (e *Engine) Signal(ctx context.Context, sig string, ids []string) error {
	_, err := e.run(ctx, nil, "scancel", append([]string{"--signal=" + sig, "--full"}, ids...)...)
	return err
}

// Requeue puts the jobs ids back in the queue (scontrol requeue), as a
// preemption does.
func (e *Engine) Requeue(ctx context.Context, ids []string) error {
	_, err := e.run(ctx, nil, "scontrol", "requeue", strings.Join(ids, ","))
	return err
}

// Describe reads the cluster's name and Slurm's version from scontrol
// show config.
func (e *Engine) Describe(ctx context.Context) (fleet.Cluster, error) {
	out, err := e.run(ctx, nil, "scontrol", "show", "config")
	if err != nil {
		return fleet.Cluster{}, err
	}
	c := fleet.Cluster{Engine: e.Name(), Partition: e.partition}
	for line := range strings.SplitSeq(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "ClusterName":
			c.Name = strings.TrimSpace(v)
		case "SLURM_VERSION":
			c.Version = strings.TrimSpace(v)
		}
	}
	if c.Name == "" {
		return c, errors.New("scontrol show config printed no ClusterName\nhint: is SLURM_CONF set to the cluster's slurm.conf?")
	}
	return c, nil
}

// run runs a client command with the engine's environment plus env and
// returns its stdout; a failure carries its stderr.
func (e *Engine) run(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(append(os.Environ(), e.env...), env...)
	stdout := &limitedBuffer{max: outputLimit}
	stderr := &limitedBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err := cmd.Run()
	e.log.Debug("slurm command", "cmd", name, "args", args, "took", time.Since(start), "err", err)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("running %s: %w\nhint: install Slurm's client commands (Debian: slurm-client) on the submitting machine", name, err)
		}
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("running %s: no answer within %v\nhint: is slurmctld up? try: scontrol ping", name, commandTimeout)
		}
		return stdout.Bytes(), fmt.Errorf("running %s: %w: %s", name, err, truncate(strings.TrimSpace(stderr.String()), 2000))
	}
	if stdout.over {
		return nil, fmt.Errorf("running %s: output larger than %d MiB", name, outputLimit>>20)
	}
	return stdout.Bytes(), nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
