package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/stats"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newCompareCmd) }

func newCompareCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "compare --baseline FILE --candidate FILE",
		Short: "Compare benchmark samples against a baseline (exit 1 on any SLOWER)",
		Long: `compare judges each case of a candidate against a baseline: median delta
(Hodges-Lehmann shift) with its confidence interval, a Mann-Whitney U
p-value, and a verdict SAME | FASTER | SLOWER | AMBIGUOUS. SLOWER needs both
p < alpha and a slowdown beyond the threshold; fewer than 10 samples a side
is AMBIGUOUS, never SAME. A case in the baseline but not the candidate is
MISSING and fails like SLOWER. AMBIGUOUS fails the gate too (the data cannot
rule out a regression), with how many samples each side is missing, unless
--allow-ambiguous is given.

Files may be results files, a benchmark step's benchmark.json or a baseline
(gpuattest baseline save). Samples from different hardware are not
compared: every case is AMBIGUOUS with the differing fields (exit 1),
unless --allow-hardware-mismatch is given. A benchmark step with a
reference compares in the same run, on the same device, instead.

Exit codes: 0 no regression, 1 a SLOWER, MISSING or (without
--allow-ambiguous) AMBIGUOUS case or an unreadable file (a missing baseline
is an error, never a skip), 2 usage.`,
		Args: cobra.NoArgs,
	}
	var (
		baseline, candidate, threshold string
		alpha                          float64
		allowMismatch, allowAmbiguous  bool
	)
	c.Flags().StringVar(&baseline, "baseline", "", "baseline file (baseline, benchmark.json or results JSON)")
	c.Flags().StringVar(&candidate, "candidate", "", "candidate file (benchmark.json or results JSON)")
	c.Flags().StringVar(&threshold, "threshold", "3%", "smallest slowdown that counts")
	c.Flags().Float64Var(&alpha, "alpha", stats.DefaultAlpha, "significance level of the Mann-Whitney test")
	c.Flags().BoolVar(&allowMismatch, "allow-hardware-mismatch", false, "compare samples taken on different hardware (said loudly)")
	c.Flags().BoolVar(&allowAmbiguous, "allow-ambiguous", false, "pass cases the data cannot decide (AMBIGUOUS); they fail by default")
	out := outputFlag(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		if baseline == "" || candidate == "" {
			return usageErr("compare needs --baseline FILE and --candidate FILE")
		}
		thr, err := pipeline.ParsePercent(threshold)
		if err != nil {
			return usageErr("--threshold: %v", err)
		}
		if alpha <= 0 || alpha >= 1 {
			return usageErr("--alpha %v: expected a level between 0 and 1, such as 0.01", alpha)
		}
		if thr >= 1 {
			return usageErr("--threshold %s: expected a slowdown below 100%%", threshold)
		}
		base, err := run.LoadSampleSet(baseline, "baseline")
		if err != nil {
			return withCode(exitFailed, err)
		}
		cand, err := run.LoadSampleSet(candidate, "candidate")
		if err != nil {
			return withCode(exitFailed, err)
		}
		rep, err := run.Compare(base, cand, thr, alpha, allowMismatch)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("comparing: %w", err))
		}
		if msg := gateAmbiguous(rep, allowAmbiguous); msg != "" {
			fmt.Fprintln(c.ErrOrStderr(), "gpuattest: "+msg)
		}
		if rep.HardwareRefused {
			fmt.Fprintln(c.ErrOrStderr(), "gpuattest: "+textsafe.Lines(rep.RefusalMessage()))
		} else if len(rep.HardwareMismatch) > 0 {
			fmt.Fprintf(c.ErrOrStderr(), "WARNING: COMPARING ACROSS DIFFERENT HARDWARE (--allow-hardware-mismatch): %s\n", textsafe.Line(strings.Join(rep.HardwareMismatch, "; ")))
		}
		if *out == "json" {
			if err := writeJSON(c.OutOrStdout(), rep); err != nil {
				return err
			}
		} else if err := renderCompare(c.OutOrStdout(), rep); err != nil {
			return err
		}
		if rep.Failed {
			return silentExit(exitFailed)
		}
		return nil
	}
	return c
}

// renderCompare prints the report; every string from the results files
// (paths, hardware, case names, reasons) goes through textsafe.
func renderCompare(w io.Writer, rep *run.CompareReport) error {
	safe := textsafe.Line
	fmt.Fprintf(w, "baseline:  %s (%s: %s)\n", safe(rep.Baseline.Path), safe(rep.Baseline.Kind), safe(rep.Baseline.Hardware.String()))
	fmt.Fprintf(w, "candidate: %s (%s: %s)\n", safe(rep.Candidate.Path), safe(rep.Candidate.Kind), safe(rep.Candidate.Hardware.String()))
	fmt.Fprintf(w, "gate: threshold %.2f%%, alpha %g\n", 100*rep.Gate.Threshold, rep.Gate.Alpha)
	switch {
	case rep.HardwareRefused:
		fmt.Fprintf(w, "DIFFERENT HARDWARE, not compared: %s\n", safe(strings.Join(rep.HardwareMismatch, "; ")))
	case len(rep.HardwareMismatch) > 0:
		fmt.Fprintf(w, "WARNING: DIFFERENT HARDWARE, compared anyway: %s\n", safe(strings.Join(rep.HardwareMismatch, "; ")))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tVERDICT\tDELTA\tCI\tP\tBASELINE\tCANDIDATE")
	for _, c := range rep.Cases {
		delta, ci, p := "-", "-", "-"
		if c.BaselineN > 0 && c.CandidateN > 0 {
			delta = fmt.Sprintf("%+.2f%%", 100*c.Shift.Delta)
			ci = fmt.Sprintf("[%+.2f%%, %+.2f%%]", 100*c.Shift.CI.Lo, 100*c.Shift.CI.Hi)
			p = fmt.Sprintf("%.2g", c.P())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(c.Name), safe(string(c.Verdict)), delta, ci, p,
			sideStr(c.BaselineN, c.BaselineMedian), sideStr(c.CandidateN, c.CandidateMedian))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, c := range rep.Cases {
		if c.Verdict != stats.Same {
			fmt.Fprintf(w, "%s: %s: %s\n", safe(c.Name), safe(string(c.Verdict)), safe(c.Reason))
		}
	}
	var parts []string
	for _, v := range []stats.Verdict{stats.Same, stats.Faster, stats.Slower, stats.Ambiguous, stats.Missing, stats.New} {
		if n := rep.Counts[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	result := "PASS"
	if rep.Failed {
		result = "FAIL"
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", result, strings.Join(parts, ", "))
	return err
}

// gateAmbiguous fails rep when it has AMBIGUOUS cases and they are not
// allowed, and returns the message that says so, with the samples each
// case is missing; "" when there is nothing to say. A report refused for
// its hardware has failed already and says why itself.
func gateAmbiguous(rep *run.CompareReport, allow bool) string {
	n := rep.Counts[stats.Ambiguous]
	if n == 0 || rep.HardwareRefused {
		return ""
	}
	var lines []string
	for _, c := range rep.Cases {
		if c.Verdict == stats.Ambiguous {
			lines = append(lines, "  "+textsafe.Line(c.Name)+": "+missingSamples(c.BaselineN, c.CandidateN))
		}
	}
	if allow {
		return fmt.Sprintf("%d AMBIGUOUS case(s) passed (--allow-ambiguous):\n%s", n, strings.Join(lines, "\n"))
	}
	rep.Failed = true
	return fmt.Sprintf("%d AMBIGUOUS case(s) fail the gate: the data cannot rule out a regression\n%s\nhint: collect at least %d samples a side and compare again, or pass --allow-ambiguous",
		n, strings.Join(lines, "\n"), stats.MinSamples)
}

// missingSamples says how many samples each side lacks for a verdict.
func missingSamples(base, cand int) string {
	if base >= stats.MinSamples && cand >= stats.MinSamples {
		return fmt.Sprintf("0 samples missing (n=%d and %d): too noisy to decide at this threshold; more samples may decide", base, cand)
	}
	side := func(name string, n int) string {
		if n >= stats.MinSamples {
			return fmt.Sprintf("%s has %d", name, n)
		}
		return fmt.Sprintf("%s has %d of %d, %d missing", name, n, stats.MinSamples, stats.MinSamples-n)
	}
	return side("baseline", base) + "; " + side("candidate", cand)
}

func sideStr(n int, median float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fns (n=%d)", median, n)
}
