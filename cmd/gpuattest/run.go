package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newRunCmd) }

type runFlags struct {
	out      string
	resume   string
	jobs     int
	noCache  bool
	locked   bool
	output   *string
	quiet    bool
	verbose  bool
	cacheDir string
	rimStore string
	root     *string
	sign     *signFlags
	registry *registryFlags
	fleet    *fleetFlags
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	c := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a pipeline",
		Long: "run executes the pipeline's steps as a DAG (at most --jobs at once), writing\n" +
			"run.json, logs and outputs into the run directory. Build steps are cached by\n" +
			"content; tests, benchmarks and burn-ins always run. --resume DIR continues an\n" +
			"interrupted run, re-running only the steps that did not pass.\n\n" +
			"Exit status: 0 every step passed, 1 a step failed or the run was interrupted,\n" +
			"2 the pipeline or the flags are invalid.",
		Args: cobra.ExactArgs(1),
	}
	c.Flags().StringVar(&f.out, "out", "", "run directory (default .gpuattest/runs/<time>-<name>)")
	c.Flags().StringVar(&f.resume, "resume", "", "continue the run in this directory")
	c.Flags().IntVar(&f.jobs, "jobs", runtime.NumCPU(), "steps run at once")
	c.Flags().BoolVar(&f.noCache, "no-cache", false, "do not use the build cache")
	c.Flags().StringVar(&f.cacheDir, "cache-dir", "", "build cache directory (default $XDG_CACHE_HOME/gpuattest)")
	c.Flags().StringVar(&f.rimStore, "rim-store", "", "directory of RIMs (<RIM ID>.xml) and OCSP answers (*.ocsp) to keep beside the GPUs' evidence, for verification without network")
	c.Flags().BoolVar(&f.locked, "locked", false, "refuse floating image tags and a missing or stale lock (implied by release: true)")
	c.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	c.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "log informational messages, not only warnings, to stderr")
	f.output = outputFlag(c)
	f.root = rootFlag(c)
	f.sign = addSignFlags(c)
	f.registry = addRegistryFlags(c) // for benchmark references that name a published release
	f.registry.addReadFlags(c)
	f.fleet = addFleetFlags(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*f.output); err != nil {
			return err
		}
		if f.out != "" && f.resume != "" {
			return usageErr("--out and --resume both name a run directory: give one")
		}
		if f.jobs < 1 {
			return usageErr("--jobs %d: expected 1 or more", f.jobs)
		}
		p, err := loadPipeline(args[0], *f.root)
		if err != nil {
			var probs pipeline.Problems
			if errors.As(err, &probs) {
				fmt.Fprintln(c.ErrOrStderr(), probs.Error())
				fmt.Fprintf(c.ErrOrStderr(), "%d problem%s found; nothing was run\n", len(probs), plural(len(probs)))
				return silentExit(exitUsage)
			}
			return withCode(exitUsage, err)
		}
		if f.fleet.file != "" {
			return runFleet(c, p, f)
		}
		if err := gpuStepsSupported(p); err != nil {
			return err
		}
		var prog *progress
		if !f.quiet {
			prog = newProgress(c.ErrOrStderr(), p, progressOptions{})
		}
		opts, err := runOptions(c, p, f, prog)
		if err != nil {
			prog.Close()
			return err
		}
		res, err := run.Pipeline(c.Context(), p, opts...)
		prog.Close()
		if res != nil {
			appendStepSummary(c.ErrOrStderr(), res.Dir)
		}
		switch {
		case errors.Is(err, run.ErrInvalid):
			return withCode(exitUsage, err)
		case err != nil:
			return withCode(exitFailed, err)
		}
		if *f.output == "json" {
			sum := runSummary(res)
			sum.Attestations = res.Attestation
			if err := writeJSON(c.OutOrStdout(), sum); err != nil {
				return err
			}
		} else {
			printRunSummary(c.OutOrStdout(), res)
			if a := res.Attestation; a != nil {
				fmt.Fprintf(c.OutOrStdout(), "attestations: %s (%d signed by %s; validation result: %s)\n", a.File, len(a.Statements), a.Signer, a.Result)
			}
		}
		if !res.Passed() {
			return silentExit(exitFailed)
		}
		return nil
	}
	return c
}

// runOptions turns the flags into the run's options. The signing key is
// unlocked here, before the first step (a wrong password must not cost
// the run), after checking it is outside the pipeline's root; the signing
// secrets then leave this process's environment.
func runOptions(c *cobra.Command, p *pipeline.Pipeline, f *runFlags, prog *progress) ([]run.Option, error) {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	src, err := gpuSource()
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	stderr := c.ErrOrStderr()
	logw := stderr
	if prog != nil {
		logw = prog.Writer() // above the live status area
	}
	opts := []run.Option{
		run.WithJobs(f.jobs),
		run.WithVersion(buildVersion().Version),
		// Warnings (a floating image tag, a gate comparing across
		// hardware) reach the user even with -q.
		run.WithLogger(slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level}))),
		run.WithWarnings(func(w string) { fmt.Fprintln(logw, "warning: "+textsafe.Lines(w)) }),
		run.WithGPUSource(src),
	}
	ropts, err := f.registry.options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, run.WithReferenceRegistry(ropts...))
	if f.out != "" {
		opts = append(opts, run.WithOutDir(f.out))
	}
	if f.resume != "" {
		opts = append(opts, run.WithResume(f.resume))
	}
	if f.noCache {
		opts = append(opts, run.WithoutCache())
	}
	if f.rimStore != "" {
		opts = append(opts, run.WithRIMStore(f.rimStore))
	}
	if f.cacheDir != "" {
		opts = append(opts, run.WithCacheDir(f.cacheDir))
	}
	if f.locked {
		opts = append(opts, run.WithLocked())
	}
	if prog != nil {
		opts = append(opts, run.WithProgress(prog.Event))
	}
	if f.sign.set() {
		files := map[string]string{"--key": f.sign.key}
		if tok, ok := strings.CutPrefix(f.sign.identityToken, "@"); ok {
			files["--identity-token"] = tok
		}
		if err := run.CheckSigningFiles(p, files); err != nil {
			return nil, withCode(exitUsage, err)
		}
		signer, err := f.sign.signer(c)
		if err != nil {
			return nil, err
		}
		if err := run.DropSigningSecrets(); err != nil {
			fmt.Fprintf(c.ErrOrStderr(), "warning: the signing secrets are unset, but their values stay readable in /proc/%d/environ: %v\n", os.Getpid(), err)
		}
		opts = append(opts, run.WithSigner(signer, f.sign.key))
	}
	return opts, nil
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

type stepSummary struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	State      string `json:"state"`
	DurationMS int64  `json:"duration_ms"`
	Cache      string `json:"cache,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

type runSummaryJSON struct {
	Dir          string           `json:"dir"`
	Attestations *run.Attestation `json:"attestations,omitempty"`
	Pipeline     string           `json:"pipeline"`
	Digest       string           `json:"pipeline_digest"`
	State        string           `json:"state"`
	Reason       string           `json:"reason,omitempty"`
	// Warnings are the steps' warnings: a passed run with any passed with
	// warnings.
	Warnings  []string      `json:"warnings,omitempty"`
	Simulated bool          `json:"simulated_hardware"`
	Steps     []stepSummary `json:"steps"`
}

func runSummary(res *run.Result) runSummaryJSON {
	r := res.Record
	out := runSummaryJSON{Dir: res.Dir, Pipeline: r.Pipeline.Name, Digest: r.Pipeline.Digest, State: string(r.State), Reason: r.Reason, Warnings: r.Warnings()}
	if r.Hardware != nil {
		out.Simulated = r.Hardware.Simulated
	}
	for _, s := range r.Steps {
		out.Steps = append(out.Steps, stepSummary{ID: s.ID, Kind: s.Kind, State: string(s.State), DurationMS: s.DurationMS, Cache: s.Cache, ExitCode: s.ExitCode, Reason: s.Reason})
	}
	return out
}

func printRunSummary(w io.Writer, res *run.Result) {
	r := res.Record
	state, warnings := strings.ToUpper(string(r.State)), r.Warnings()
	if r.State == runtypes.Passed && len(warnings) > 0 {
		state += " WITH WARNINGS"
	}
	fmt.Fprintf(w, "pipeline %s: %s\n", textsafe.Line(r.Pipeline.Name), state)
	if r.Hardware != nil && r.Hardware.Simulated {
		fmt.Fprintln(w, "hardware: SIMULATED (GPUATTEST_FAKE_GPU); not a real GPU")
	}
	for _, s := range r.Steps {
		cache := ""
		if s.Cache == "hit" {
			cache = "cached"
		}
		reason := ""
		if s.State != runtypes.Passed && s.Reason != "" {
			reason = textsafe.Line(firstLine(s.Reason))
		}
		fmt.Fprintf(w, "  %-8s %-20s %-11s %8s %-6s %s\n", s.State, textsafe.Line(s.ID), textsafe.Line(s.Kind), fmtDuration(time.Duration(s.DurationMS)*time.Millisecond), cache, reason)
	}
	if line := gpuEvidenceLine(r.GPUEvidence); line != "" {
		fmt.Fprintln(w, textsafe.Line(line))
	}
	if r.Reason != "" {
		fmt.Fprintf(w, "%s\n", textsafe.Lines(r.Reason))
	}
	for _, wn := range warnings {
		fmt.Fprintf(w, "warning: %s\n", textsafe.Line(wn))
	}
	fmt.Fprintf(w, "run directory: %s\n", textsafe.Line(res.Dir))
}

// gpuEvidenceLine says what the run's GPUs signed: "GPU evidence: 2/2
// collected (SIMULATED)", or the unattested GPUs with their reasons; ""
// when none was collected.
func gpuEvidenceLine(raw json.RawMessage) string {
	var g attest.GPUEvidence
	if len(raw) == 0 || json.Unmarshal(raw, &g) != nil {
		return ""
	}
	if len(g.GPUs) == 0 {
		return "GPU evidence: none (" + g.Reason + ")"
	}
	n, sim := 0, false
	var why []string
	for _, c := range g.GPUs {
		if c.Evidence != nil {
			n++
			sim = sim || c.Source == gpuevidence.SourceSimulated
		} else {
			why = append(why, fmt.Sprintf("GPU %d: %s", c.Index, c.Reason))
		}
	}
	s := fmt.Sprintf("GPU evidence: %d/%d collected", n, len(g.GPUs))
	if sim {
		s += " (SIMULATED)"
	}
	if len(why) > 0 {
		s += ", unattested: " + strings.Join(why, "; ")
	}
	return s
}

// gpuStepsSupported refuses (exit 2) a pipeline with a gpu: true step in
// a build that cannot read GPUs (not linux with cgo), naming the step and
// the platform, before anything runs.
func gpuStepsSupported(p *pipeline.Pipeline) error {
	for _, s := range p.Steps {
		if s.GPU {
			if err := run.GPUUnsupported(); err != nil {
				return withCode(exitUsage, fmt.Errorf("step %s has gpu: true: %w", s.ID, err))
			}
		}
	}
	return nil
}
