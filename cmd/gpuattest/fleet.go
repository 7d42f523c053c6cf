package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ad "github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	_ "github.com/gpuattest/gpuattest/pipeline/fleet/engines"
	"github.com/gpuattest/gpuattest/pipeline/fleet/node"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newFleetCmd) }

// fleetFlags are run's flags for a fleet run.
type fleetFlags struct {
	file     string
	timeout  time.Duration
	detach   bool
	simulate bool
	kube     kubeFlags
	registry *registryFlags
}

// addFleetFlags adds --fleet and its companions to run.
func addFleetFlags(c *cobra.Command) *fleetFlags {
	f := &fleetFlags{}
	c.Flags().StringVar(&f.file, "fleet", "", "run the gpu: true steps on every node of every class of this fleet file (Slurm or Kubernetes, as its engine says), under a signed dispatch")
	c.Flags().DurationVar(&f.timeout, "timeout", 0, "with --fleet: cancel the jobs and fail after this long (default: no limit)")
	c.Flags().BoolVar(&f.detach, "detach", false, "with --fleet: submit and exit; 'gpuattest fleet collect RUNDIR' waits and collects later")
	c.Flags().BoolVar(&f.simulate, "simulate-gpus", false, "with --fleet: each node simulates its GPUs from its class's gres type (GPUATTEST_FAKE_GPU), labelled simulated; for tests and demos")
	f.kube.add(c)
	return f
}

func newFleetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Collect, verify and run the node side of a fleet dispatch",
		Long: "A release runs across a fleet with 'gpuattest run FILE --fleet fleet.yaml --key K'.\n" +
			"These commands serve it: 'collect' waits for a detached dispatch and collects\n" +
			"its node bundles, 'verify' checks a collected dispatch, and 'node' is what each\n" +
			"job runs on its node (the job script calls it).",
	}
	c.AddCommand(newFleetNodeCmd(), newFleetSignCmd(), newFleetCollectCmd(), newFleetVerifyCmd(), newFleetPushCmd())
	return c
}

// runFleet is run --fleet: the build part here, the GPU part on the
// fleet under a signed dispatch.
func runFleet(c *cobra.Command, p *pipeline.Pipeline, f *runFlags) error {
	spec, err := fleet.Load(f.fleet.file)
	if err != nil {
		var probs pipeline.Problems
		if errors.As(err, &probs) {
			fmt.Fprintln(c.ErrOrStderr(), probs.Error())
			fmt.Fprintf(c.ErrOrStderr(), "%d problem%s found; nothing was run\n", len(probs), plural(len(probs)))
			return silentExit(exitUsage)
		}
		return withCode(exitUsage, err)
	}
	if !f.sign.set() {
		return usageErr("--fleet needs --key or --keyless: the dispatch is signed by the release owner")
	}
	// Before the build: a sharedDir others could swap a dispatch directory
	// in is refused now (staging checks it again).
	if err := coordinate.CheckStaging(spec); err != nil {
		return withCode(exitFailed, fmt.Errorf("staging the dispatch: %w", err))
	}
	build, nodes := coordinate.Split(p)
	if len(nodes.Steps) == 0 {
		return usageErr("%s has no gpu: true step: there is nothing to run on the fleet", p.Path)
	}
	if len(build.Steps) == 0 {
		return usageErr("%s has no step without gpu: true: the fleet needs build outputs to dispatch", p.Path)
	}
	out := f.out
	if out == "" {
		out = filepath.Join(".gpuattest", "runs", time.Now().UTC().Format("20060102-150405")+"-"+p.Name+"-fleet")
	}
	if err := run.CheckSigningFiles(p, map[string]string{"--key": f.sign.key}); err != nil {
		return withCode(exitUsage, err)
	}
	signer, err := f.sign.signer(c)
	if err != nil {
		return err
	}
	_ = run.DropSigningSecrets()
	stderr := c.ErrOrStderr()
	// The build part: once, here, unsigned (the dispatch signs its outputs).
	bf := *f
	bf.sign, bf.out, bf.resume = &signFlags{}, filepath.Join(out, coordinate.BuildDir), ""
	var prog *progress
	if !f.quiet {
		prog = newProgress(stderr, build, progressOptions{})
	}
	opts, err := runOptions(c, build, &bf, prog)
	if err != nil {
		prog.Close()
		return err
	}
	res, err := run.Pipeline(c.Context(), build, opts...)
	prog.Close()
	if err != nil {
		return withCode(exitFailed, err)
	}
	if !res.Passed() {
		printRunSummary(c.OutOrStdout(), res)
		return withCode(exitFailed, errors.New("the build failed: nothing was dispatched"))
	}
	f.fleet.registry = f.registry
	return dispatchFleet(c, p, spec, signer, res.Dir, out, f.fleet, f.quiet)
}

// dispatchFleet stages and signs the dispatch, submits it, and waits
// and collects unless detached.
func dispatchFleet(c *cobra.Command, p *pipeline.Pipeline, spec *fleet.Spec, signer *sign.Signer, buildDir, out string, ff *fleetFlags, quiet bool) error {
	ctx := c.Context()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	e, err := engineFor(spec.Engine, spec.Config, spec.PollInterval.D, ff.kube)
	if err != nil {
		return withCode(exitUsage, err)
	}
	// The dispatch names the cluster (its server and namespace, where
	// the engine has them); an engine that stages through a registry
	// stages in the run directory first.
	stage := coordinate.Stage{Pipeline: p, BuildDir: buildDir, Fleet: spec, Binary: self, Signer: signer,
		ReleaseDir: filepath.Join(out, coordinate.ReleaseDir), StageDir: filepath.Join(out, "stage")}
	if stage.Cluster, err = e.Describe(ctx); err != nil {
		return withCode(exitFailed, fmt.Errorf("describing the cluster: %w", err))
	}
	if stage.Registry, err = ff.registry.options(); err != nil {
		return err
	}
	prep, err := coordinate.Prepare(ctx, stage)
	if err != nil {
		return withCode(exitFailed, fmt.Errorf("staging the dispatch: %w", err))
	}
	st, err := coordinate.Submit(ctx, e, spec, prep, coordinate.TimeLimit(p), ff.simulate, out)
	if err != nil {
		return withCode(exitFailed, err)
	}
	w := c.OutOrStdout()
	fmt.Fprintf(w, "dispatch %s: %d job(s) submitted to %s cluster %s (%s %s)\n", prep.Dispatch.ID, len(st.Jobs), st.Cluster.Engine, st.Cluster.Name, st.Cluster.Engine, st.Cluster.Version)
	if st.Cluster.Namespace != "" {
		fmt.Fprintf(w, "namespace %s on %s; staged as %s\n", st.Cluster.Namespace, st.Cluster.Server, st.Release)
	}
	if ff.simulate {
		fmt.Fprintln(w, "hardware: SIMULATED on every node (--simulate-gpus); not real GPUs")
	}
	if ff.detach {
		fmt.Fprintf(w, "detached; collect it with: gpuattest fleet collect %s\n", out)
		return nil
	}
	return waitAndCollect(c, e, st, out, ff.timeout, ff.simulate, quiet, ff.registry)
}

// waitAndCollect waits for the jobs with a progress line per change on
// stderr (none when quiet), collects the node bundles and prints one row
// per job.
func waitAndCollect(c *cobra.Command, e fleet.Scheduler, st *coordinate.State, out string, timeout time.Duration, simulated, quiet bool, rf *registryFlags) error {
	w := c.ErrOrStderr()
	last := map[string]string{}
	err := coordinate.Wait(c.Context(), e, st, out, timeout, func(s *coordinate.State) {
		if quiet {
			return
		}
		idw := 8 // Slurm's job IDs; a Kubernetes Job/index is longer
		for _, j := range s.Jobs {
			idw = max(idw, len(j.ID))
		}
		for _, j := range s.Jobs {
			if line := jobLine(j, idw); line != last[j.Name] {
				last[j.Name] = line
				fmt.Fprintln(w, line)
			}
		}
	})
	switch {
	case errors.Is(err, context.Canceled):
		return withCode(exitInterrupted, fmt.Errorf("interrupted: the dispatch's %d job(s) were cancelled; %s is not collected", len(st.Jobs), out))
	case errors.Is(err, coordinate.ErrTimeout):
		return withCode(exitFailed, fmt.Errorf("%w after %v: its %d job(s) were cancelled", err, timeout, len(st.Jobs)))
	case err != nil:
		return withCode(exitFailed, err)
	}
	opts, err := rf.options()
	if err != nil {
		return err
	}
	col, err := coordinate.Collect(context.WithoutCancel(c.Context()), st, out, simulated, opts...)
	if err != nil {
		return withCode(exitFailed, err)
	}
	for _, m := range col.Missing {
		fmt.Fprintln(w, "missing: "+m)
	}
	printFleetReport(c.OutOrStdout(), col.Report)
	fmt.Fprintf(c.OutOrStdout(), "run directory: %s\n", out)
	if !col.Report.Verified {
		return silentExit(exitFailed)
	}
	return nil
}

// jobLine is a job's progress line: name, scheduler ID, state, node,
// elapsed time and the step in progress.
func jobLine(j coordinate.JobState, idWidth int) string {
	elapsed := ""
	if !j.Status.Start.IsZero() {
		end := j.Status.End
		if end.IsZero() {
			end = time.Now()
		}
		elapsed = end.Sub(j.Status.Start).Truncate(time.Second).String()
	}
	step := ""
	if j.Step != "" && j.Status.State == fleet.Running {
		step = "step " + j.Step
	}
	reason := ""
	if j.Status.Reason != "" && !j.Status.State.Final() {
		reason = "(" + j.Status.Reason + ")"
	}
	return strings.TrimRight(fmt.Sprintf("  %-16s %-*s %-10s %-12s %-8s %s %s", j.Name, idWidth, j.ID, j.Status.State, orDash(j.Status.Node), elapsed, step, reason), " ")
}

// printFleetReport prints one row per job, then the problems.
func printFleetReport(w io.Writer, r *ad.Report) {
	verdict := "FAILED"
	if r.Verified {
		verdict = "PASSED"
	}
	fmt.Fprintf(w, "fleet dispatch: %s\n", verdict)
	if r.Dispatch != nil {
		fmt.Fprintf(w, "dispatch %s (%s), %d job(s)\n", r.Dispatch.ID, r.DispatchDigest, len(r.Dispatch.Jobs))
		fmt.Fprintln(w, hostStepsLine(r.HostSteps))
	}
	if r.SimulatedAccepted {
		fmt.Fprintln(w, "simulated GPUs accepted: the verdict says nothing about real hardware")
	}
	idw := 8
	for _, j := range r.Jobs {
		idw = max(idw, len(orDash(j.JobID)))
	}
	for _, j := range r.Jobs {
		sim, sandbox := "", ""
		if j.Simulated {
			sim = "simulated"
		}
		if j.Sandbox != "" {
			sandbox = "host steps sandbox: " + j.Sandbox
		}
		line := fmt.Sprintf("  %-16s %-10s %-*s %-12s %-9s %-9s %s", j.Job, j.Class, idw, orDash(j.JobID), orDash(j.Node), j.Verdict, sim, sandbox)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		if j.GPUEvidence != "" {
			fmt.Fprintln(w, "    "+textsafe.Line(j.GPUEvidence))
		}
	}
	for _, c := range r.Coverage {
		by := strings.Join(c.By, ", ")
		if !c.Covered {
			by = "NOT COVERED"
		}
		fmt.Fprintf(w, "  target %-8s %s\n", c.Target, by)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  FAIL "+firstLine(p))
	}
}

// hostStepsLine says how the owner's dispatch lets the nodes run
// host-runner steps; each job's row then shows its node's own claim,
// which verify checks against it.
func hostStepsLine(mode string) string {
	switch mode {
	case ad.HostStepsUnsandboxed:
		return "host steps: UNSANDBOXED, as the owner signed (hostSteps: unsandboxed): a host-runner step could read any job key of the dispatch"
	case ad.HostStepsPod:
		return "host steps: in each pod's node container, which holds no key (Kubernetes), as the owner signed"
	}
	return "host steps: sandboxed, as the owner signed (bwrap on each node, the shared directory and its keys hidden)"
}

// engineFor builds the scheduler of the engine named for its settings
// cfg, throttled to poll (the engine's default when 0);
// GPUATTEST_FLEET_POLL, for tests, overrides it.
func engineFor(name string, cfg fleet.EngineConfig, poll time.Duration, kf kubeFlags) (fleet.Scheduler, error) {
	if v := os.Getenv("GPUATTEST_FLEET_POLL"); v != "" { // tests poll faster
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("GPUATTEST_FLEET_POLL=%q: %w", v, err)
		}
		if d < 100*time.Millisecond {
			return nil, fmt.Errorf("GPUATTEST_FLEET_POLL=%q: below 100ms; each poll costs the scheduler's controller", v)
		}
		poll = d
	}
	return fleet.Open(name, cfg, fleet.Access{"kubeconfig": kf.kubeconfig, "context": kf.context}, poll)
}

func newFleetNodeCmd() *cobra.Command {
	var release, dispatchDigest string
	var registry *registryFlags
	c := &cobra.Command{
		Use:   "node (DISPATCH-DIR CLASS | --release REF CLASS)",
		Short: "Run one job of a dispatch on this node (the job script calls it)",
		Long: "node runs the GPU steps of the dispatch in DISPATCH-DIR as job CLASS-$" + fleet.IndexEnv + ",\n" +
			"after checking every staged file against the dispatch, and signs the node's bundle\n" +
			"with the job's key, which it then deletes. A requeued job resumes its run. It works\n" +
			"only in a DISPATCH-DIR that no one but its user can replace, and refuses a dispatch\n" +
			"file whose digest is not --dispatch-digest (the job script pins it).\n\n" +
			"With --release (Kubernetes: the pod's node container) it pulls the staged dispatch\n" +
			"from the registry by digest instead, checks and runs it the same way, and writes its\n" +
			"unsigned report to " + fleet.ReportMount + " for 'gpuattest fleet sign', which alone holds the key.\n\n" +
			"Exit status: 0 the node passed, 1 it failed (its bundle says why), 2 bad input.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			idx, err := strconv.Atoi(os.Getenv(fleet.IndexEnv))
			if err != nil {
				return usageErr("$%s is %q: expected the job's index (the fleet's job script runs this command)", fleet.IndexEnv, os.Getenv(fleet.IndexEnv))
			}
			if (release != "") != (len(args) == 1) {
				return usageErr("give DISPATCH-DIR and CLASS, or --release REF and CLASS")
			}
			if release == "" && !validDigest(dispatchDigest) {
				return usageErr("--dispatch-digest is %q: expected sha256:<64 hex digits>, the dispatch file's digest, which the fleet's job script passes", dispatchDigest)
			}
			if err := run.GPUUnsupported(); err != nil {
				return withCode(exitUsage, fmt.Errorf("fleet node: %w", err))
			}
			src, err := gpuSource()
			if err != nil {
				return withCode(exitUsage, err)
			}
			host, _ := os.Hostname()
			jobID, nodeName := fleet.NodeIdentity(os.Environ())
			n := node.Node{
				JobID: jobID, NodeName: cmp.Or(nodeName, host),
				GPUSource: src, Simulate: os.Getenv(coordinate.SimulateEnv) == "1",
				Env: os.Environ(), Version: buildVersion().Version,
			}
			if release != "" {
				return reportNode(c, n, release, args[0], idx, registry)
			}
			n.Dir, n.Job, n.DispatchDigest = args[0], fmt.Sprintf("%s-%d", args[1], idx), dispatchDigest
			res, err := node.RunNode(c.Context(), n)
			if res != nil {
				fmt.Fprintf(c.OutOrStdout(), "job %s on %s: %s; bundle %s\n", n.Job, n.NodeName, res.Node.Result, res.Bundle)
			}
			if err != nil {
				return withCode(exitFailed, err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&release, "release", "", "the staged dispatch in the fleet's registry, by digest (REPOSITORY@sha256:...); Kubernetes")
	c.Flags().StringVar(&dispatchDigest, "dispatch-digest", "", "with DISPATCH-DIR: the sha256 digest (sha256:<hex>) the dispatch file must have; the job script passes it")
	registry = addRegistryFlags(c)
	return c
}

func newFleetCollectCmd() *cobra.Command {
	var timeout time.Duration
	var simulated, quiet bool
	var kf kubeFlags
	var registry *registryFlags
	c := &cobra.Command{
		Use:   "collect RUNDIR",
		Short: "Wait for a detached dispatch and collect its node bundles",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := coordinate.LoadState(args[0])
			if err != nil {
				return withCode(exitUsage, err)
			}
			f, ok := fleet.Lookup(st.Cluster.Engine)
			if !ok {
				return usageErr("%s names engine %q, which this gpuattest does not have (it has: %s)", coordinate.StateFile, st.Cluster.Engine, strings.Join(fleet.EngineNames(), ", "))
			}
			e, err := engineFor(st.Cluster.Engine, f.Recorded(st.Cluster), 0, kf)
			if err != nil {
				return withCode(exitUsage, err)
			}
			return waitAndCollect(c, e, st, args[0], timeout, simulated || st.Simulated, quiet, registry)
		},
	}
	kf.add(c)
	registry = addRegistryFlags(c)
	c.Flags().DurationVar(&timeout, "timeout", 0, "cancel the jobs and fail after this long (default: no limit)")
	c.Flags().BoolVar(&simulated, "allow-simulated", false, "accept simulated GPUs")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return c
}

func newFleetVerifyCmd() *cobra.Command {
	var allowSimulated bool
	var registry *registryFlags
	output := ""
	f := &verifyFlags{output: &output}
	c := &cobra.Command{
		Use:   "verify RUNDIR|REF",
		Short: "Verify a collected fleet dispatch: every job reported exactly once, signed by its key, on its class's hardware",
		Long: "verify checks the dispatch in RUNDIR, or in the release REF names (a registry\n" +
			"or oci-layout:DIR, as fleet push published it), against the owner's key or keyless identity,\n" +
			"then every node bundle in RUNDIR/nodes against the key the dispatch delegated to its\n" +
			"job: a bundle signed by any other key, the owner's included, counts for no job. Every\n" +
			"pinned target must be covered by a job that passed on GPUs of its compute capability.\n\n" +
			"gpuattest verify --bundle FILE... or verify REF does the same for a fleet release; this\n" +
			"command also reads a collected run directory.\n\n" +
			"Exit status: 0 verified, 10 the dispatch's signature, 11 a subject of the dispatch is\n" +
			"not a file of the release read, 12 a job missing, duplicated,\n" +
			"foreign, failed or on the wrong hardware, or a target not covered (named), 2 bad input.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := f.checkMaterial(); err != nil {
				return err
			}
			owner, err := f.ownerOptions()
			if err != nil {
				return withCode(exitUsage, err)
			}
			var r *ad.Report
			source := args[0]
			if st, serr := os.Stat(args[0]); serr == nil && st.IsDir() {
				r, err = coordinate.VerifyDir(c.Context(), args[0], owner, allowSimulated)
			} else {
				var fetched *oci.Fetched
				if r, fetched, err = verifyFleetRef(c, args[0], owner, allowSimulated, registry, pullDest{}); err == nil {
					source = fetched.Source
				}
			}
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return withCode(exitUsage, err)
			} else if err != nil {
				return err
			}
			return renderFleet(c.OutOrStdout(), output, r, &oci.Fetched{Source: source}, false, pullDest{})
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.keyPath, "key", "", "the release owner's PEM public key")
	fl.StringVar(&f.trustedRoot, "trusted-root", "", "Sigstore trusted root JSON, for a keyless dispatch")
	fl.StringVar(&f.san, "certificate-identity", "", "keyless: expected certificate SAN of the dispatch's signer")
	fl.StringVar(&f.sanRE, "certificate-identity-regexp", "", "keyless: regexp the certificate SAN must match")
	fl.StringVar(&f.issuer, "certificate-oidc-issuer", "", "keyless: expected OIDC issuer of the certificate")
	fl.StringVar(&f.issuerRE, "certificate-oidc-issuer-regexp", "", "keyless: regexp the OIDC issuer must match")
	fl.BoolVar(&allowSimulated, "allow-simulated", false, "accept simulated GPUs (tests and demos)")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	registry = addRegistryFlags(c)
	return c
}

// verifyFleetRef reads the release ref names, with its bundle referrers,
// and verifies the dispatch among them, its subjects against the files;
// with dest, it writes the files and an OCI layout copy (the release, the
// dispatch and every node bundle) only when that passed. It returns the
// report and the release read (Source REPOSITORY@sha256:..., and where it
// was written).
func verifyFleetRef(c *cobra.Command, ref string, owner []verify.Option, allowSimulated bool, rf *registryFlags, dest pullDest) (*ad.Report, *oci.Fetched, error) {
	opts, err := rf.options()
	if err != nil {
		return nil, nil, err
	}
	v, err := verify.New(append(append([]verify.Option{}, owner...), verify.WithPredicateType(ad.PredicateType))...)
	if err != nil {
		return nil, nil, err
	}
	if dest.files != "" {
		opts = append(opts, oci.WithFilesTo(dest.files))
	}
	if dest.layout != "" {
		opts = append(opts, oci.WithLayoutTo(dest.layout))
	}
	var r *ad.Report
	check := func(ctx context.Context, fetched *oci.Fetched) (bool, error) {
		files := map[string]string{}
		var arts []verify.Artifact
		for _, f := range fetched.Files {
			files[f.Name] = f.SHA256
			arts = append(arts, verify.Artifact{Name: f.Name, SHA256: f.SHA256})
		}
		// Every file served is an artifact that must be a subject, and
		// every subject a file served.
		var err error
		r, err = ad.VerifyEntries(ctx, fetched.Entries, owner, ad.Options{AllowSimulated: allowSimulated, Files: files, Manifest: fetched.Digest, Artifacts: arts})
		return err == nil && r.Verified, err
	}
	fetched, err := await(c.Context(), dest.any(), func(ctx context.Context) (*oci.Fetched, error) {
		return oci.Pull(ctx, v, ref, check, opts...)
	})
	if err != nil {
		return nil, nil, err
	}
	return r, fetched, nil
}

// validDigest reports whether d is sha256:<64 lowercase hex digits>.
func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func newFleetPushCmd() *cobra.Command {
	var allowFailed, allowSimulated bool
	var registry *registryFlags
	c := &cobra.Command{
		Use:   "push RUNDIR REF",
		Short: "Publish a collected fleet release: its files, and the dispatch and every node bundle as referrers",
		Long: "push publishes the released files of the collected fleet run in RUNDIR to REF\n" +
			"(REGISTRY/REPOSITORY[:TAG]) as one OCI artifact, whose manifest digest the\n" +
			"dispatch signs, and the dispatch and each node bundle as its referrers. It refuses\n" +
			"a run that was not collected and, without --allow-failed, one that did not pass.",
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := registry.options()
			if err != nil {
				return err
			}
			res, err := coordinate.Push(c.Context(), args[0], args[1], allowFailed, allowSimulated, opts...)
			if err != nil {
				return withCode(exitFailed, err)
			}
			fmt.Fprintf(c.OutOrStdout(), "pushed %s: %d file(s), %d bundle(s) as referrers (%d written, %s)\n", res.Ref, res.Files, res.Bundles, res.Written, res.Referrers)
			return nil
		},
	}
	c.Flags().BoolVar(&allowFailed, "allow-failed", false, "publish a release that did not pass (its bundles say what failed)")
	c.Flags().BoolVar(&allowSimulated, "allow-simulated", false, "count simulated GPUs as passing when checking the release before pushing")
	registry = addRegistryFlags(c)
	return c
}
