package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/engine"
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
	root     *string
	sign     *signFlags
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
	c.Flags().BoolVar(&f.locked, "locked", false, "refuse floating image tags and a missing or stale lock (implied by release: true)")
	c.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	c.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "log informational messages, not only warnings, to stderr")
	f.output = outputFlag(c)
	f.root = rootFlag(c)
	f.sign = addSignFlags(c)
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
		// Unlock the signing key before the first step (a wrong password
		// must not cost the run), and keep it out of the steps' reach: a
		// key file inside the root is refused, and the signing secrets
		// leave this process's environment once the signer holds what it
		// needs.
		var signer *sign.Signer
		if f.sign.set() {
			if err := f.sign.outsideRoot(p.Root); err != nil {
				return err
			}
			if signer, err = f.sign.signer(c); err != nil {
				return err
			}
			dropSigningSecrets()
			warnHostBuilds(c.ErrOrStderr(), p)
		}
		var prog *progress
		if !f.quiet {
			prog = newProgress(c.ErrOrStderr(), p, progressOptions{})
		}
		opts, err := engineOptions(c, p, f, prog)
		if err != nil {
			prog.Close()
			return err
		}
		res, err := engine.Run(c.Context(), p, opts...)
		prog.Close()
		if err != nil {
			return withCode(exitFailed, err)
		}
		appendStepSummary(c.ErrOrStderr(), res.Dir)
		var attested *attestation
		if signer != nil && res.Record.State != engine.Interrupted {
			if attested, err = attestRun(c.Context(), signer, p, res); err != nil {
				return withCode(exitFailed, fmt.Errorf("attesting the run: %w", err))
			}
		}
		if *f.output == "json" {
			sum := runSummary(res)
			sum.Attestations = attested
			if err := writeJSON(c.OutOrStdout(), sum); err != nil {
				return err
			}
		} else {
			printRunSummary(c.OutOrStdout(), res)
			if attested != nil {
				fmt.Fprintf(c.OutOrStdout(), "attestations: %s (%d signed by %s; validation result: %s)\n", attested.File, len(attested.Statements), attested.Signer, attested.Result)
			}
		}
		if !res.Passed() {
			return silentExit(exitFailed)
		}
		return nil
	}
	return c
}

// engineOptions builds the engine's options from flags and what this
// binary can do.
func engineOptions(c *cobra.Command, p *pipeline.Pipeline, f *runFlags, prog *progress) ([]engine.Option, error) {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logw := c.ErrOrStderr()
	if prog != nil {
		logw = prog.Writer() // above the live status area
	}
	opts := []engine.Option{
		engine.WithJobs(f.jobs),
		engine.WithVersion(buildVersion().Version),
		// Warnings (a floating image tag, a gate comparing across
		// hardware) reach the user even with -q.
		engine.WithLogger(slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level}))),
	}
	if f.out != "" {
		opts = append(opts, engine.WithOutDir(f.out))
	}
	if f.resume != "" {
		opts = append(opts, engine.WithResume(f.resume))
	}
	if f.noCache {
		opts = append(opts, engine.WithoutCache())
	}
	if f.cacheDir != "" {
		opts = append(opts, engine.WithCacheDir(f.cacheDir))
	}
	if f.sign.key != "" {
		// No step learns where the key is, not even from a variable that
		// names it.
		opts = append(opts, engine.WithBaseEnv(withoutPath(os.Environ(), f.sign.key)))
	}
	if prog != nil {
		opts = append(opts, engine.WithProgress(prog.Event))
	}
	more, err := platformOptions(c, p, f)
	if err != nil {
		return nil, err
	}
	return append(opts, more...), nil
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
	Dir          string        `json:"dir"`
	Attestations *attestation  `json:"attestations,omitempty"`
	Pipeline     string        `json:"pipeline"`
	Digest       string        `json:"pipeline_digest"`
	State        string        `json:"state"`
	Reason       string        `json:"reason,omitempty"`
	Simulated    bool          `json:"simulated_hardware"`
	Steps        []stepSummary `json:"steps"`
}

func runSummary(res *engine.Result) runSummaryJSON {
	r := res.Record
	out := runSummaryJSON{Dir: res.Dir, Pipeline: r.Pipeline.Name, Digest: r.Pipeline.Digest, State: string(r.State), Reason: r.Reason}
	if r.Hardware != nil {
		out.Simulated = r.Hardware.Simulated
	}
	for _, s := range r.Steps {
		out.Steps = append(out.Steps, stepSummary{ID: s.ID, Kind: s.Kind, State: string(s.State), DurationMS: s.DurationMS, Cache: s.Cache, ExitCode: s.ExitCode, Reason: s.Reason})
	}
	return out
}

func printRunSummary(w io.Writer, res *engine.Result) {
	r := res.Record
	fmt.Fprintf(w, "pipeline %s: %s\n", r.Pipeline.Name, strings.ToUpper(string(r.State)))
	if r.Hardware != nil && r.Hardware.Simulated {
		fmt.Fprintln(w, "hardware: SIMULATED (GPUATTEST_FAKE_GPU); not a real GPU")
	}
	for _, s := range r.Steps {
		cache := ""
		if s.Cache == "hit" {
			cache = "cached"
		}
		reason := ""
		if s.State != engine.Passed && s.Reason != "" {
			reason = firstLine(s.Reason)
		}
		fmt.Fprintf(w, "  %-8s %-20s %-11s %8s %-6s %s\n", s.State, s.ID, s.Kind, fmtDuration(time.Duration(s.DurationMS)*time.Millisecond), cache, reason)
	}
	if r.Reason != "" {
		fmt.Fprintf(w, "%s\n", r.Reason)
	}
	fmt.Fprintf(w, "run directory: %s\n", res.Dir)
}
