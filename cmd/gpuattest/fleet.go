package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
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
	// gpuRoot and rimRoot replace NVIDIA's roots when the collected
	// nodes' GPU evidence is verified (a simulated fleet's test root).
	gpuRoot, rimRoot string
	// nodeBinaries are --node-binary's GOOS/GOARCH=PATH.
	nodeBinaries []string
	kube         kubeFlags
	registry     *registryFlags
}

// addFleetFlags adds --fleet and its companions to run.
func addFleetFlags(c *cobra.Command) *fleetFlags {
	f := &fleetFlags{}
	c.Flags().StringVar(&f.file, "fleet", "", "run the gpu: true steps on every node of every class of this fleet file (Slurm or Kubernetes, as its engine says), under a signed dispatch")
	c.Flags().DurationVar(&f.timeout, "timeout", 0, "with --fleet: cancel the jobs and fail after this long (default: no limit)")
	c.Flags().BoolVar(&f.detach, "detach", false, "with --fleet: submit and exit; 'gpuattest fleet collect RUNDIR' waits and collects later")
	c.Flags().BoolVar(&f.simulate, "simulate-gpus", false, "with --fleet: each node simulates its GPUs from its class's gres type (GPUATTEST_FAKE_GPU), labelled simulated; for tests and demos")
	c.Flags().StringVar(&f.gpuRoot, "gpu-root", "", "with --fleet: device root certificate (PEM) the nodes' GPU evidence is verified under at collection, instead of the pinned NVIDIA Device Identity CA (a simulated GPU's test root)")
	c.Flags().StringVar(&f.rimRoot, "rim-root", "", "with --fleet: RIM root certificate (PEM) instead of the pinned NVIDIA RIM root, at collection")
	c.Flags().StringArrayVar(&f.nodeBinaries, "node-binary", nil, "with --fleet: the gpuattest the nodes of a platform run, as GOOS/GOARCH=PATH such as linux/arm64=dist/gpuattest-linux-arm64 (repeatable; a class's arch: picks its platform; default for this machine's own: this gpuattest)")
	f.kube.add(c)
	return f
}

// nodeBinaryOptions are --node-binary's options: GOOS/GOARCH=PATH each.
func nodeBinaryOptions(flags []string) ([]run.FleetOption, error) {
	var opts []run.FleetOption
	for _, v := range flags {
		platform, path, ok := strings.Cut(v, "=")
		goos, goarch, ok2 := strings.Cut(platform, "/")
		if !ok || !ok2 || goos == "" || goarch == "" || path == "" || strings.Contains(goarch, "/") {
			return nil, usageErr("--node-binary %q: expected GOOS/GOARCH=PATH, such as linux/arm64=dist/gpuattest-linux-arm64", v)
		}
		opts = append(opts, run.WithPlatformNodeBinary(platform, path))
	}
	return opts, nil
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

// runFleet is run --fleet: flags in, one run.Fleet, the progress and
// the report out.
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
	ff := f.fleet
	opts, err := fleetOptions(ff.kube, f.registry, ff.timeout, ff.simulate)
	if err != nil {
		return err
	}
	bins, err := nodeBinaryOptions(ff.nodeBinaries)
	if err != nil {
		return err
	}
	opts = append(opts, bins...)
	if f.out != "" {
		opts = append(opts, run.WithFleetDir(f.out))
	}
	if ff.detach {
		opts = append(opts, run.Detached())
	}
	if ff.gpuRoot != "" || ff.rimRoot != "" || f.rimStore != "" {
		gopts, err := gpuEvidenceOptions(ff.gpuRoot, ff.rimRoot, f.rimStore)
		if err != nil {
			return err
		}
		opts = append(opts, run.WithFleetGPUEvidence(false, gopts...))
	}
	signer := func() (*sign.Signer, error) {
		if err := run.CheckSigningFiles(p, map[string]string{"--key": f.sign.key}); err != nil {
			return nil, withCode(exitUsage, err)
		}
		s, err := f.sign.signer(c)
		if err != nil {
			return nil, err
		}
		_ = run.DropSigningSecrets()
		return s, nil
	}
	// The build part: once, here, unsigned (the dispatch signs its
	// outputs), with its own progress.
	var prog *progress
	closeProg := func() { prog.Close(); prog = nil }
	build := func(build *pipeline.Pipeline) ([]run.Option, error) {
		bf := *f
		bf.sign, bf.out, bf.resume = &signFlags{}, "", ""
		if !f.quiet {
			prog = newProgress(c.ErrOrStderr(), build, progressOptions{})
		}
		return runOptions(c, build, &bf, prog)
	}
	rend := &fleetRender{out: c.OutOrStdout(), err: c.ErrOrStderr(), quiet: f.quiet, simulated: ff.simulate}
	res, err := run.Fleet(c.Context(), p, spec, append(opts, run.WithFleetSigner(signer), run.WithBuildOptions(build),
		run.WithFleetProgress(func(e run.FleetEvent) {
			if e.Built {
				closeProg()
				return
			}
			rend.event(e)
		}))...)
	closeProg()
	if errors.Is(err, run.ErrFleetBuildFailed) {
		printRunSummary(c.OutOrStdout(), res.Build)
		return withCode(exitFailed, err)
	}
	if err == nil && ff.detach {
		fmt.Fprintf(c.OutOrStdout(), "detached; collect it with: gpuattest fleet collect %s\n", res.Dir)
		return nil
	}
	return rend.result(res, err, ff.timeout)
}

// fleetOptions are run.Fleet's and run.CollectFleet's options from the
// flags: the cluster's access, the registry, the timeout, simulated
// GPUs; GPUATTEST_FLEET_POLL, for tests, overrides the poll interval.
func fleetOptions(kf kubeFlags, rf *registryFlags, timeout time.Duration, simulate bool) ([]run.FleetOption, error) {
	ropts, err := rf.options()
	if err != nil {
		return nil, err
	}
	opts := []run.FleetOption{
		run.WithFleetAccess(fleet.Access{"kubeconfig": kf.kubeconfig, "context": kf.context}),
		run.WithFleetRegistry(ropts...), run.WithFleetTimeout(timeout),
	}
	if simulate {
		opts = append(opts, run.WithSimulatedGPUs())
	}
	if v := os.Getenv("GPUATTEST_FLEET_POLL"); v != "" { // tests poll faster
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, withCode(exitUsage, fmt.Errorf("GPUATTEST_FLEET_POLL=%q: %w", v, err))
		}
		if d < 100*time.Millisecond {
			return nil, withCode(exitUsage, fmt.Errorf("GPUATTEST_FLEET_POLL=%q: below 100ms; each poll costs the scheduler's controller", v))
		}
		opts = append(opts, run.WithFleetPoll(d))
	}
	return opts, nil
}

// fleetRender renders a dispatch's progress: the submission on stdout,
// a line per job and change on stderr (none when quiet), then the
// collected report.
type fleetRender struct {
	out, err         io.Writer
	quiet, simulated bool
	last             map[string]string
}

// event renders one progress event of run.Fleet or run.CollectFleet.
func (r *fleetRender) event(e run.FleetEvent) {
	if e.Submitted {
		st, w := e.State, r.out
		fmt.Fprintf(w, "dispatch %s: %d job(s) submitted to %s cluster %s (%s %s)\n", e.Prepared.Dispatch.ID, len(st.Jobs), st.Cluster.Engine, st.Cluster.Name, st.Cluster.Engine, st.Cluster.Version)
		if st.Cluster.Namespace != "" {
			fmt.Fprintf(w, "namespace %s on %s; staged as %s\n", st.Cluster.Namespace, st.Cluster.Server, st.Release)
		}
		if r.simulated {
			fmt.Fprintln(w, "hardware: SIMULATED on every node (--simulate-gpus); not real GPUs")
		}
		return
	}
	if r.quiet || e.State == nil {
		return
	}
	if r.last == nil {
		r.last = map[string]string{}
	}
	idw := 8 // Slurm's job IDs; a Kubernetes Job/index is longer
	for _, j := range e.State.Jobs {
		idw = max(idw, len(j.ID))
	}
	for _, j := range e.State.Jobs {
		if line := jobLine(j, idw); line != r.last[j.Name] {
			r.last[j.Name] = line
			fmt.Fprintln(r.err, line)
		}
	}
}

// result maps run.Fleet's or run.CollectFleet's outcome to the report
// and the exit status.
func (r *fleetRender) result(res *run.FleetResult, err error, timeout time.Duration) error {
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		return err
	case errors.Is(err, run.ErrFleetInput):
		return withCode(exitUsage, err)
	case res != nil && res.State != nil && errors.Is(err, context.Canceled):
		return withCode(exitInterrupted, fmt.Errorf("interrupted: the dispatch's %d job(s) were cancelled; %s is not collected", len(res.State.Jobs), res.Dir))
	case res != nil && res.State != nil && errors.Is(err, coordinate.ErrTimeout):
		return withCode(exitFailed, fmt.Errorf("%w after %v: its %d job(s) were cancelled", err, timeout, len(res.State.Jobs)))
	default:
		return withCode(exitFailed, err)
	}
	col := res.Collected
	for _, m := range col.Missing {
		fmt.Fprintln(r.err, "missing: "+m)
	}
	printFleetReport(r.out, col.Report)
	fmt.Fprintf(r.out, "run directory: %s\n", res.Dir)
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
func printFleetReport(w io.Writer, r *dispatch.Report) {
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
	case dispatch.HostStepsUnsandboxed:
		return "host steps: UNSANDBOXED, as the owner signed (hostSteps: unsandboxed): a host-runner step could read any job key of the dispatch"
	case dispatch.HostStepsPod:
		return "host steps: in each pod's node container, which holds no key (Kubernetes), as the owner signed"
	}
	return "host steps: sandboxed, as the owner signed (bwrap on each node, the shared directory and its keys hidden)"
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
			n := node.Config{
				JobID: jobID, NodeName: cmp.Or(nodeName, host),
				GPUSource: src, Simulate: os.Getenv(coordinate.SimulateEnv) == "1",
				Env: os.Environ(), Version: buildVersion().Version,
			}
			if release != "" {
				return reportNode(c, n, release, args[0], idx, registry)
			}
			n.Dir, n.Job, n.DispatchDigest = args[0], fmt.Sprintf("%s-%d", args[1], idx), dispatchDigest
			res, err := node.Run(c.Context(), n)
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
			opts, err := fleetOptions(kf, registry, timeout, simulated)
			if err != nil {
				return err
			}
			rend := &fleetRender{out: c.OutOrStdout(), err: c.ErrOrStderr(), quiet: quiet}
			res, err := run.CollectFleet(c.Context(), args[0], append(opts, run.WithFleetProgress(rend.event))...)
			return rend.result(res, err, timeout)
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
			gopts, err := gpuEvidenceOptions(f.gpuRoot, f.rimRoot, f.rimStore)
			if err != nil {
				return err
			}
			o := dispatch.Options{AllowSimulated: allowSimulated, GPUEvidence: gopts, RequireGPUEvidence: f.requireGPUEvidence}
			var r *dispatch.Report
			source := args[0]
			if st, serr := os.Stat(args[0]); serr == nil && st.IsDir() {
				r, err = coordinate.VerifyDir(c.Context(), args[0], owner, o)
			} else {
				var fetched *oci.Fetched
				if r, fetched, err = verifyFleetRef(c, args[0], owner, o, registry, pullDest{}); err == nil {
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
	fl.StringVar(&f.gpuRoot, "gpu-root", "", "device root certificate (PEM) of the nodes' GPU evidence instead of the pinned NVIDIA Device Identity CA")
	fl.StringVar(&f.rimRoot, "rim-root", "", "RIM root certificate (PEM) instead of the pinned NVIDIA RIM root")
	fl.StringVar(&f.rimStore, "rim-store", "", "directory of RIMs (<RIM ID>.xml) and OCSP answers (*.ocsp)")
	fl.BoolVar(&f.requireGPUEvidence, "require-gpu-evidence", false, "fail a job with an unattested GPU or no GPU evidence")
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
func verifyFleetRef(c *cobra.Command, ref string, owner []verify.Option, o dispatch.Options, rf *registryFlags, dest pullDest) (*dispatch.Report, *oci.Fetched, error) {
	opts, err := rf.options()
	if err != nil {
		return nil, nil, err
	}
	v, err := verify.New(append(append([]verify.Option{}, owner...), verify.WithPredicateType(dispatch.PredicateType))...)
	if err != nil {
		return nil, nil, err
	}
	if dest.files != "" {
		opts = append(opts, oci.WithFilesTo(dest.files))
	}
	if dest.layout != "" {
		opts = append(opts, oci.WithLayoutTo(dest.layout))
	}
	var r *dispatch.Report
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
		o.Files, o.Manifest, o.Artifacts = files, fetched.Digest, arts
		r, err = dispatch.VerifyEntries(ctx, fetched.Entries, owner, o)
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
