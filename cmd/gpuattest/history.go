package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline/history"
)

func init() { verbs = append(verbs, newHistoryCmd) }

type historyFlags struct {
	since          string
	limit, jobs    int
	threshold      float64
	html, bmf, csv string
	noBundleCache  bool
}

func newHistoryCmd() *cobra.Command {
	var f verifyFlags
	var hf historyFlags
	c := &cobra.Command{
		Use:   "history REPO [--key PUB | identity flags] [--policy FILE] [--since TAG|DATE] [--limit N] [--html F] [--bmf F] [--csv F] [-o json]",
		Short: "Draw the verified benchmark history of a repository's releases",
		Long: `List the release tags of REPO (REGISTRY/REPOSITORY), verify each release as
verify REF does (the same trust flags, policy and limits), and draw every
benchmark case's median, confidence interval, throughput and percent of
roofline across the releases that verified. A release that does not verify
is left out of every series, and a line names it and why: nothing
unverified is ever drawn.

A series is one case on one kind of hardware: GPU model, driver, clocks
locked or not, simulated or not. Points from different hardware never join
one line. Each point names its release tag, the release manifest's digest
and the digest of the bundle it was read from. A step between consecutive
releases larger than --threshold is marked, naming both digests.

--since keeps the tags from TAG on (tags ordered as versions) or the
releases whose run finished on or after DATE (YYYY-MM-DD); --limit keeps
the N newest tags. --html writes one self-contained page (inline SVG, no
script, nothing fetched), --bmf Bencher Metric Format (one document per
release tag), --csv one row per point. At most --jobs releases are
verified at once. The Sigstore bundles read are kept by digest under the
user's cache directory (gpuattest/bundles, at most 256 MiB, oldest removed
first), so a second history over mostly the same releases fetches the new
ones only; each cached file is hashed again when read and verified as one
fetched (--no-bundle-cache reads every bundle from the registry).

Exit codes: 0 history drawn (releases left out are named, not an error),
1 error, 2 usage, 130 interrupted.`,
		Args: cobra.ExactArgs(1),
	}
	rf := addRegistryFlags(c)
	rf.addReadFlags(c)
	f.output = outputFlag(c)
	f.addFlags(c, "")
	fl := c.Flags()
	fl.StringVar(&hf.since, "since", "", "keep releases from this tag on (version order), or whose run finished on or after this date (YYYY-MM-DD)")
	fl.IntVar(&hf.limit, "limit", 0, "keep only the N newest tags (0: all)")
	fl.IntVar(&hf.jobs, "jobs", history.DefaultJobs, "releases verified at once")
	fl.Float64Var(&hf.threshold, "threshold", 3, "mark a step of more than this percent between consecutive releases (the gate's default, 3)")
	fl.StringVar(&hf.html, "html", "", "write a self-contained HTML page to this file")
	fl.StringVar(&hf.bmf, "bmf", "", "write Bencher Metric Format (JSON, one document per release tag) to this file")
	fl.StringVar(&hf.csv, "csv", "", "write one CSV row per point to this file")
	fl.BoolVar(&hf.noBundleCache, "no-bundle-cache", false, "read every bundle from the registry, not from the user's bundle cache")
	c.RunE = func(c *cobra.Command, args []string) error { return runHistory(c, &f, rf, &hf, args[0]) }
	return c
}

func runHistory(c *cobra.Command, f *verifyFlags, rf *registryFlags, hf *historyFlags, repo string) error {
	if err := checkOutput(*f.output); err != nil {
		return err
	}
	if err := f.checkMaterial(); err != nil {
		return err
	}
	opts := []history.Option{history.WithJobs(hf.jobs), history.WithThreshold(hf.threshold / 100)}
	if hf.jobs < 1 || hf.jobs > 64 {
		return usageErr("--jobs %d: expected 1 to 64", hf.jobs)
	}
	if !(hf.threshold > 0) {
		return usageErr("--threshold %g: expected a percent above 0", hf.threshold)
	}
	if hf.limit < 0 {
		return usageErr("--limit %d: expected 0 (all) or more", hf.limit)
	}
	if hf.limit > 0 {
		opts = append(opts, history.WithLimit(hf.limit))
	}
	if hf.since != "" {
		opts = append(opts, history.WithSince(hf.since))
	}
	ro, err := rf.options()
	if err != nil {
		return err
	}
	cache := openBundleCache(hf.noBundleCache)
	if cache != nil {
		ro = append(ro, oci.WithBundleCache(cache))
		defer func() { _ = cache.Trim() }() // a cache left over its size costs disk, not a result
	}
	opts = append(opts, history.WithRegistryOptions(ro...))
	v, err := f.verifier()
	if err != nil {
		return inputError(c.Context(), err)
	}
	h, err := history.Collect(c.Context(), repo, v, opts...)
	if err != nil {
		return inputError(c.Context(), err)
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{{hf.html, h.WriteHTML}, {hf.bmf, h.WriteBMF}, {hf.csv, h.WriteCSV}} {
		if out.path == "" {
			continue
		}
		if err := atomicfile.WriteFrom(out.path, 0o644, out.write); err != nil {
			return fmt.Errorf("writing %s: %w", out.path, err)
		}
	}
	w := c.OutOrStdout()
	if *f.output == "json" {
		return h.WriteJSON(w)
	}
	printHistory(w, h)
	return nil
}

// printHistory writes the text summary: the releases drawn, in signed
// order, each with its signed identity and any flag; the releases left
// out; then each series with its marked steps.
func printHistory(w io.Writer, h *history.History) {
	fmt.Fprintf(w, "%s: %d release(s) verified, %d left out, %d series\n", textsafe.Line(h.Repository), len(h.Releases), len(h.Excluded), len(h.Series))
	for _, r := range h.Releases {
		var runs []string
		for _, run := range r.Runs {
			s := "run " + orUnnamed(run.RunID) + " finished " + run.FinishedAt.UTC().Format(time.RFC3339)
			if run.SignedAt != nil {
				s += " signed " + run.SignedAt.UTC().Format(time.RFC3339)
			}
			runs = append(runs, s+" on "+run.Hardware)
		}
		fmt.Fprintf(w, "release  %s  %s: %s\n", textsafe.Line(strings.Join(r.Tags, ", ")), r.Manifest, textsafe.Line(strings.Join(runs, "; ")))
		for _, f := range r.Flags {
			fmt.Fprintf(w, "FLAG  %s: %s\n", textsafe.Line(r.Tag), textsafe.Line(f))
		}
	}
	for _, e := range h.Excluded {
		fmt.Fprintf(w, "LEFT OUT  %s: %s\n", textsafe.Line(e.Tag), textsafe.Line(e.Reason))
	}
	for _, s := range h.Series {
		fmt.Fprintf(w, "series  %s: %d point(s)\n", textsafe.Line(s.Key.String()), len(s.Points))
		for _, m := range s.Marks {
			fmt.Fprintf(w, "  STEP  %s -> %s: %+.1f%% %s (%s -> %s)\n", textsafe.Line(s.Points[m.From].Tag), textsafe.Line(s.Points[m.To].Tag),
				m.Delta*100, m.Direction(), m.FromManifest, m.ToManifest)
		}
	}
	if len(h.Releases) == 0 && len(h.Excluded) > 0 {
		fmt.Fprintln(w, "nothing drawn: no release verified")
	}
}

// openBundleCache opens the user's bundle cache, or returns nil when
// off or when there is no cache directory (the cache only saves
// fetches).
func openBundleCache(off bool) *oci.BundleCache {
	if off {
		return nil
	}
	dir, err := oci.BundleCacheDir()
	if err != nil {
		return nil
	}
	c, err := oci.OpenBundleCache(dir, oci.DefaultBundleCacheSize)
	if err != nil {
		return nil
	}
	return c
}

// orUnnamed is a run id, or says the statement has none.
func orUnnamed(id string) string {
	if id == "" {
		return "(no run id)"
	}
	return id
}
