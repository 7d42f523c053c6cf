package coordinate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/jsonstrict"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"
)

// StateFile is the coordinator's record in the run directory: the
// dispatch, the cluster and every job's scheduler ID and last state. A
// detached dispatch is collected from it.
const StateFile = "fleet.json"

// Run-directory names of the collected dispatch.
const (
	NodesDir = "nodes"
)

// State is the coordinator's record of a dispatch (StateFile).
type State struct {
	// Dispatch is the dispatch directory on the shared filesystem;
	// DispatchDigest its statement's digest; DispatchFile the sha256
	// digest of the dispatch file the coordinator signed and keeps in
	// the run directory (DispatchFile), which is what it checks the
	// nodes against: it never reads the shared copy back.
	Dispatch       string `json:"dispatch"`
	DispatchDigest string `json:"dispatchDigest"`
	DispatchFile   string `json:"dispatchFile,omitempty"`
	// Cluster is the cluster the jobs went to; JobScript the script's
	// digest.
	Cluster   fleet.Cluster `json:"cluster"`
	JobScript string        `json:"jobScript"`
	// Simulated is true when the nodes simulate their GPUs.
	Simulated bool `json:"simulated,omitempty"`
	// SubmittedAt is when the jobs were submitted.
	SubmittedAt time.Time `json:"submittedAt"`
	// Jobs are every job with its scheduler ID and last known state.
	Jobs []JobState `json:"jobs"`
	// Done is true once every job ended and the bundles were collected.
	Done bool `json:"done"`
	// Release is the staged dispatch in the fleet's registry, by digest
	// (Kubernetes): the node bundles come back to its Repository.
	Release string `json:"release,omitempty"`
	// Cleanup says what the engine could not clean up once the jobs
	// ended (a Secret left).
	Cleanup string `json:"cleanup,omitempty"`
}

// JobState is one job in the coordinator's record.
type JobState struct {
	Name   string       `json:"name"`
	Class  string       `json:"class"`
	Index  int          `json:"index"`
	ID     string       `json:"id"`
	Status fleet.Status `json:"status"`
	// Step is the step the node reported running.
	Step string `json:"step,omitempty"`
}

// Submit submits every class of spec through e, one job per node, each
// running the prepared dispatch's job script, and returns the record it
// wrote to outDir/fleet.json. When a class cannot be submitted, the jobs
// already submitted are cancelled.
func Submit(ctx context.Context, e fleet.Scheduler, spec *fleet.Spec, prep *Prepared, timeLimit func(*fleet.Class) time.Duration, simulate bool, outDir string) (*State, error) {
	cluster, err := e.Describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("describing the cluster: %w", err)
	}
	st := &State{Dispatch: prep.Dir, DispatchDigest: prep.Digest, DispatchFile: stagefs.DigestOf(prep.File), Cluster: cluster, JobScript: prep.JobScript, Simulated: simulate,
		SubmittedAt: time.Now().UTC(), Release: prep.Release}
	// The coordinator's own copy of what it signed, kept before any job
	// runs: collect, push and report read this one, never the shared
	// directory's.
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(outDir, stagefs.DispatchFile), prep.File, 0o644); err != nil {
		return nil, err
	}
	for i := range spec.Classes {
		c := &spec.Classes[i]
		req, err := request(prep, c, timeLimit(c), simulate)
		if err != nil {
			_ = e.Cancel(context.WithoutCancel(ctx), st.IDs())
			return nil, err
		}
		hs, err := e.Submit(ctx, req)
		if err != nil {
			_ = e.Cancel(context.WithoutCancel(ctx), st.IDs())
			return nil, err
		}
		for _, h := range hs {
			st.Jobs = append(st.Jobs, JobState{Name: fmt.Sprintf("%s-%d", c.Name, h.Index), Class: c.Name, Index: h.Index, ID: h.ID,
				Status: fleet.Status{ID: h.ID, State: fleet.Pending}})
		}
		if len(hs) > 0 && hs[0].Object != "" {
			st.Cluster.Objects = append(st.Cluster.Objects, fleet.Object{Kind: "Job", Name: hs[0].Object, Class: c.Name, UID: hs[0].UID, Manifest: hs[0].Manifest})
		}
	}
	if err := st.Save(outDir); err != nil {
		_ = e.Cancel(context.WithoutCancel(ctx), st.IDs())
		return nil, err
	}
	return st, nil
}

// request is the Request of class c: the common part here, what its
// jobs run and how they get their keys from the dispatch's transport.
func request(prep *Prepared, c *fleet.Class, limit time.Duration, simulate bool) (fleet.Request, error) {
	env := map[string]string{}
	if simulate {
		env[stagefs.SimulateEnv] = "1"
	}
	req := fleet.Request{
		Name: "gpuattest-" + c.Name, Class: c.Name, Selectors: c.Selectors, Count: c.Nodes, Dispatch: prep.Dispatch.ID,
		Env: env, TimeLimit: limit, Requeue: true,
	}
	if prep.transport == nil {
		return req, errors.New("submitting: the dispatch was not prepared by Prepare")
	}
	err := prep.transport.request(prep, c, &req)
	return req, err
}

// TimeLimit is a class's job time limit: its timeLimit, or the sum of the
// GPU steps' timeouts (an hour for a step without one) plus 10 minutes.
func TimeLimit(p *pipeline.Pipeline) func(*fleet.Class) time.Duration {
	_, gp := Split(p)
	total := 10 * time.Minute
	for _, s := range gp.Steps {
		switch {
		case !s.Timeout.IsZero():
			total += s.Timeout.D
		case !s.Duration.IsZero():
			total += s.Duration.D + 10*time.Minute
		default:
			total += time.Hour
		}
	}
	return func(c *fleet.Class) time.Duration {
		if !c.TimeLimit.IsZero() {
			return c.TimeLimit.D
		}
		return total
	}
}

// markCancelled records every job that had not ended as cancelled by
// the coordinator (or, when the cancel failed, says so), so the record
// left after Ctrl-C or a timeout never shows a cancelled job as pending
// or running. The node it ran on, if any, is kept.
func (s *State) markCancelled(cancelErr error) {
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.Status.State.Final() {
			continue
		}
		if cancelErr != nil {
			j.Status.Reason = "the coordinator stopped waiting and could not cancel it: " + cancelErr.Error()
			continue
		}
		j.Status.Raw, j.Status.State = string(j.Status.State), fleet.Cancelled
		j.Status.Reason = "cancelled by the coordinator (interrupted or timed out)"
	}
}

// IDs are the scheduler IDs of every job.
func (s *State) IDs() []string {
	ids := make([]string, len(s.Jobs))
	for i, j := range s.Jobs {
		ids[i] = j.ID
	}
	return ids
}

// Save writes the record to dir/fleet.json atomically.
func (s *State) Save(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, StateFile), append(b, '\n'), 0o644)
}

// LoadState reads dir/fleet.json.
func LoadState(dir string) (*State, error) {
	b, err := limits.ReadFile(filepath.Join(dir, StateFile), limits.RecordBytes, "fleet record")
	if err != nil {
		return nil, fmt.Errorf("reading the fleet record: %w\nhint: is %s the run directory of a run --fleet?", err, dir)
	}
	var s State
	if probs := jsonstrict.Read(filepath.Join(dir, StateFile), b, maxStateDepth, &s); len(probs) > 0 {
		probs[len(probs)-1].Hint = "the fleet record is run --fleet's own; one that does not read as written was not written by it"
		return nil, probs.Err()
	}
	return &s, nil
}

// maxStateDepth bounds the nesting of fleet.json (it nests four deep).
const maxStateDepth = 16

// Validate reports the fields of the coordinator's record without which
// it names no job to collect: each job's name and class. (An engine
// that is not one this gpuattest has is the collector's to say.)
func (s *State) Validate() problem.List {
	var probs problem.List
	for i, j := range s.Jobs {
		if j.Name == "" || j.Class == "" {
			probs = append(probs, problem.Problem{Path: fmt.Sprintf("jobs[%d]", i), Message: "expected a job's name and class"})
		}
	}
	return probs
}

// maxPollFailures is how many polls in a row may fail before Wait gives up.
const maxPollFailures = 6

// ErrTimeout is returned by Wait when the overall timeout passed; the
// jobs were cancelled.
var ErrTimeout = errors.New("the dispatch did not finish in time")

// Wait polls the jobs (the engine bounds the rate) until every one has
// ended, calling progress after each poll, and saves the record as it
// goes. When ctx is cancelled (Ctrl-C) or timeout passes (0 for none), it
// cancels every job of the dispatch with the engine and returns
// ctx.Err() or ErrTimeout.
func Wait(ctx context.Context, e fleet.Scheduler, s *State, outDir string, timeout time.Duration, progress func(*State)) error {
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-deadline:
			stop()
		case <-pollCtx.Done():
		}
	}()
	failures := 0
	for {
		st, err := e.Status(pollCtx, s.IDs())
		if pollCtx.Err() != nil {
			cerr := e.Cancel(context.WithoutCancel(ctx), s.IDs())
			s.removeKeys()
			s.markCancelled(cerr)
			_ = s.Save(outDir)
			if ctx.Err() != nil {
				return errors.Join(ctx.Err(), cerr)
			}
			return errors.Join(ErrTimeout, cerr)
		}
		if err != nil {
			// A busy or restarting controller: try again at the next
			// poll; the jobs run on regardless.
			if failures++; failures >= maxPollFailures {
				return fmt.Errorf("polling the jobs failed %d times in a row: %w\nhint: the jobs still run; collect them later with gpuattest fleet collect %s", failures, err, outDir)
			}
			continue
		}
		failures = 0
		done := true
		for i := range s.Jobs {
			j := &s.Jobs[i]
			if got, ok := st[j.ID]; ok {
				if got.State == fleet.Gone && j.Status.State.Final() {
					got = j.Status // ended and purged: keep what was seen
				}
				j.Status = got
			}
			if step, err := readStep(filepath.Join(s.Dispatch, "jobs", j.Name, stagefs.StepFile)); err == nil {
				j.Step = step
			}
			done = done && j.Status.State.Final()
		}
		if done {
			if f, ok := e.(fleet.Finisher); ok {
				if err := f.Finish(context.WithoutCancel(ctx), s.IDs()); err != nil {
					s.Cleanup = err.Error()
				}
			}
		}
		if err := s.Save(outDir); err != nil {
			return err
		}
		if progress != nil {
			progress(s)
		}
		if done {
			return nil
		}
	}
}

// Collected is the outcome of Collect.
type Collected struct {
	// Report is the verification of every node bundle against the
	// dispatch.
	Report *dispatch.Report
	// Missing are jobs that left no bundle, with the scheduler's state.
	Missing []string
}

// Collect copies the dispatch and every node bundle from the shared
// directory (from the fleet's registry, for a dispatch staged there, by
// NodeTag; opts reach it) into outDir (dispatch.intoto.jsonl, nodes/<job>.intoto.jsonl),
// checks every bundle against the dispatch, and marks the record done.
// A job without a bundle is reported missing with the scheduler's state
// and reason.
func Collect(ctx context.Context, s *State, outDir string, o dispatch.Options, opts ...oci.Option) (*Collected, error) {
	if s.DispatchFile == "" {
		// A record of an older gpuattest, which kept no copy: the shared
		// one, if it is the statement the record names.
		disp, err := limits.ReadFile(filepath.Join(s.Dispatch, stagefs.DispatchFile), 64<<20, "dispatch")
		if err != nil {
			return nil, err
		}
		if err := checkDispatch(disp, s, filepath.Join(s.Dispatch, stagefs.DispatchFile)); err != nil {
			return nil, err
		}
		if err := atomicfile.Write(filepath.Join(outDir, stagefs.DispatchFile), disp, 0o644); err != nil {
			return nil, err
		}
	}
	var err error
	if err := os.MkdirAll(filepath.Join(outDir, NodesDir), 0o755); err != nil {
		return nil, err
	}
	out := &Collected{}
	t, err := recordTransport(s)
	if err != nil {
		return nil, err
	}
	read, done := t.bundles(ctx, s, opts)
	defer done()
	for _, j := range s.Jobs {
		b, err := read(j.Name)
		if err != nil {
			reason := string(j.Status.State)
			if j.Status.Reason != "" {
				reason += " (" + j.Status.Reason + ")"
			}
			var why *unreadable
			if errors.As(err, &why) {
				reason += "; " + stagefs.FirstLine(err.Error())
			}
			out.Missing = append(out.Missing, fmt.Sprintf("job %s (%s %s on %s): no node bundle; %s", j.Name, s.Cluster.Engine, j.ID, orDash(j.Status.Node), reason))
			continue
		}
		dst := filepath.Join(outDir, NodesDir, j.Name+".intoto.jsonl")
		if err := atomicfile.Write(dst, b, 0o644); err != nil {
			return nil, err
		}
	}
	if out.Report, err = verifyDir(ctx, outDir, s, nil, o); err != nil {
		return nil, err
	}
	s.Done = true
	s.removeKeys()
	return out, s.Save(outDir)
}

// removeKeys deletes the key of every job of the dispatch that is left
// where the transport staged it: their jobs have ended (or were
// cancelled), and a node deletes its own only when it signed.
func (s *State) removeKeys() {
	if t, err := recordTransport(s); err == nil {
		t.removeKeys(s)
	}
}

// VerifyDir verifies the dispatch in a collected run directory and every
// bundle in its nodes/ directory. owner are the options that verify the
// dispatch's signature (a key, or a trusted root and identity); nil
// checks only the nodes against the dispatch as written (the coordinator,
// which signed it, does so). o says what else to accept or require
// (simulated GPUs; the roots and collateral of the nodes' GPU evidence).
func VerifyDir(ctx context.Context, dir string, owner []verify.Option, o dispatch.Options) (*dispatch.Report, error) {
	var st *State
	if owner == nil {
		var err error
		if st, err = LoadState(dir); err != nil {
			return nil, err
		}
	}
	return verifyDir(ctx, dir, st, owner, o)
}

// verifyDir is VerifyDir; without owner, the dispatch counts only if it
// is the one the coordinator's record st names.
func verifyDir(ctx context.Context, dir string, st *State, owner []verify.Option, o dispatch.Options) (*dispatch.Report, error) {
	disp, err := limits.ReadFile(filepath.Join(dir, stagefs.DispatchFile), 64<<20, "dispatch")
	if err != nil {
		return nil, fmt.Errorf("reading the dispatch: %w\nhint: is %s the run directory of a run --fleet?", err, dir)
	}
	if owner == nil {
		if err := checkDispatch(disp, st, filepath.Join(dir, stagefs.DispatchFile)); err != nil {
			return nil, err
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, NodesDir, "*.intoto.jsonl"))
	if err != nil {
		return nil, err
	}
	var nodes []verify.Entry
	for _, f := range files {
		b, err := limits.ReadFile(f, 64<<20, "node bundle")
		if err != nil {
			return nil, err
		}
		es, err := verify.ParseBundles(f, b)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, es...)
	}
	entry := verify.Entry{Source: filepath.Join(dir, stagefs.DispatchFile), Data: disp}
	if owner == nil {
		return dispatch.CheckNodes(ctx, entry, nodes, o)
	}
	return dispatch.Verify(ctx, entry, owner, nodes, o)
}

// ErrNotOurDispatch is wrapped by the error for a dispatch file that is
// not the one the coordinator's record (fleet.json) names.
var ErrNotOurDispatch = errors.New("not the dispatch this run signed")

// checkDispatch checks the dispatch file data, read from path, against
// the coordinator's record: its sha256 (DispatchFile), or for a record
// without one its statement's digest (DispatchDigest).
func checkDispatch(data []byte, s *State, path string) error {
	if s.DispatchFile != "" {
		if got := stagefs.DigestOf(data); got != s.DispatchFile {
			return fmt.Errorf("%w: %s is %s, %s names %s (a dispatch signed by another key, or an older one?)", ErrNotOurDispatch, path, got, StateFile, s.DispatchFile)
		}
		return nil
	}
	st, err := sign.UnverifiedStatement(bytes.TrimSpace(data))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if got, err := dispatch.Digest(st); err != nil || got != s.DispatchDigest {
		return fmt.Errorf("%w: %s holds the statement %s, %s names %s", ErrNotOurDispatch, path, got, StateFile, s.DispatchDigest)
	}
	return nil
}

// maxStepFile bounds the step file a node writes (a step's ID).
const maxStepFile = 4 << 10

// readStep reads a job's step file: a regular file, not a symbolic link,
// of at most maxStepFile bytes. A node's step could have planted a link
// to /dev/zero or a FIFO there; neither blocks nor grows the read.
func readStep(path string) (string, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %w", path, limits.ErrNotRegular)
	}
	b, err := limits.ReadAll(f, maxStepFile, path, "step file")
	if err != nil {
		return "", err
	}
	return textsafe.Line(strings.TrimSpace(string(b))), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
