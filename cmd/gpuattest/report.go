package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/report"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newReportCmd) }

// reportFlags are the report verb's flags.
type reportFlags struct {
	html, markdown, pngDir string
	// verify holds --bundle and verify's flags.
	verify verifyFlags
}

func newReportCmd() *cobra.Command {
	f := &reportFlags{}
	c := &cobra.Command{
		Use:   "report RUNDIR | report --bundle FILE (--key PUB | --certificate-identity ID --certificate-oidc-issuer URL) [ARTIFACT...]",
		Short: "Render a run, or a verified attestation bundle, as HTML and Markdown",
		Long: `report renders a run directory as one self-contained HTML page (inline CSS
and SVG charts, no script, nothing fetched; default RUNDIR/report.html):
the verdict with simulated-hardware and CPU-backend warnings, the hardware,
a step timeline, build facts, every benchmark case's samples against its
reference or baseline, burn-in series, GPU telemetry and the attestation
subjects. --markdown FILE writes a compact summary for pull requests and
job summaries; --png-dir DIR writes the charts as PNG files.

For the run directory of a run --fleet, the report is the build's (it ran
on this machine) with a Fleet section first: one row per node, with its
job, class, node name, job ID (Slurm's, or a Kubernetes Job/index), GPUs, verdict and reason (the node
bundles checked against the dispatch as collect checks them; gpuattest
verify also checks the dispatch's signature).

With --bundle it verifies the bundle first, exactly as gpuattest verify does
(same flags), and renders only what verified, with the criteria and their
results (default report.html). A bundle that does not verify gets no report:
the checks are printed and the exit code is verify's.

Exit status: 0 written, 1 error, 2 usage; with --bundle 10, 11, 12 as verify.`,
		Args: cobra.ArbitraryArgs,
	}
	fl := c.Flags()
	fl.StringVar(&f.html, "html", "", "HTML report file (default RUNDIR/report.html, or report.html with --bundle)")
	fl.StringVar(&f.markdown, "markdown", "", "also write a Markdown summary to this file (- for stdout)")
	fl.StringVar(&f.pngDir, "png-dir", "", "also write every chart as a PNG into this directory")
	fl.StringVar(&f.verify.bundlePath, "bundle", "", "verify this Sigstore bundle (or JSON Lines of bundles) and report what verified")
	f.verify.addFlags(c, "with --bundle: ")
	c.RunE = func(c *cobra.Command, args []string) error {
		var (
			rep *report.Report
			err error
		)
		switch {
		case f.verify.bundlePath != "":
			if rep, err = f.verified(c, args); err != nil {
				return err
			}
			if f.html == "" {
				f.html = "report.html"
			}
		case len(args) > 1:
			return usageErr("report takes one run directory (artifacts are checked with --bundle)")
		case len(args) == 1:
			if v := &f.verify; v.keyPath != "" || v.keyless() || v.policyPath != "" {
				return usageErr("--key, --policy and the identity flags verify a bundle: give --bundle FILE")
			}
			var err error
			if coordinate.IsRunDir(args[0]) {
				rep, err = coordinate.Report(c.Context(), args[0])
			} else {
				rep, err = report.FromRunDir(args[0])
			}
			if err != nil {
				return withCode(exitFailed, err)
			}
			if f.html == "" {
				f.html = filepath.Join(args[0], "report.html")
			}
		default:
			return usageErr("give a run directory, or --bundle FILE with --key or identity flags")
		}
		return writeReports(c, rep, f.html, f.markdown, f.pngDir)
	}
	return c
}

// writeReports writes the HTML, and the Markdown and PNGs when asked,
// and prints where they went.
func writeReports(c *cobra.Command, rep *report.Report, html, markdown, pngDir string) error {
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		return withCode(exitFailed, fmt.Errorf("rendering the report: %w", err))
	}
	if err := atomicfile.Write(html, b.Bytes(), 0o644); err != nil {
		return withCode(exitFailed, fmt.Errorf("writing the report: %w", err))
	}
	if markdown != "" {
		var m bytes.Buffer
		if err := rep.WriteMarkdown(&m, report.WithHTMLPath(html)); err != nil {
			return withCode(exitFailed, err)
		}
		if markdown == "-" {
			if _, err := c.OutOrStdout().Write(m.Bytes()); err != nil {
				return err
			}
		} else if err := atomicfile.Write(markdown, m.Bytes(), 0o644); err != nil {
			return withCode(exitFailed, fmt.Errorf("writing the summary: %w", err))
		}
	}
	if pngDir != "" {
		files, err := rep.WritePNGs(pngDir)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("writing charts: %w", err))
		}
		fmt.Fprintf(c.ErrOrStderr(), "charts: %d PNG files in %s\n", len(files), pngDir)
	}
	if markdown != "" && markdown != "-" {
		fmt.Fprintf(c.ErrOrStderr(), "summary: %s\n", markdown)
	}
	fmt.Fprintf(c.OutOrStdout(), "report: %s\n", html)
	return nil
}

// verified verifies the bundle as gpuattest verify does and gathers the
// report of what verified; a failed verification prints its checks and
// exits with verify's code.
func (f *reportFlags) verified(c *cobra.Command, args []string) (*report.Report, error) {
	vf := &f.verify
	keyless := vf.keyless()
	switch {
	case vf.keyPath != "" && keyless:
		return nil, usageErr("--key and --certificate-identity/--certificate-oidc-issuer are exclusive")
	case vf.keyPath == "" && !keyless:
		return nil, usageErr("--bundle needs verification material\nhint: give --key PUB, or --trusted-root FILE with --certificate-identity and --certificate-oidc-issuer; a report of an unverified bundle is not made")
	case keyless && (vf.san == "" && vf.sanRE == "" || vf.issuer == "" && vf.issuerRE == ""):
		return nil, usageErr("keyless verification needs both an identity (--certificate-identity[-regexp]) and an issuer (--certificate-oidc-issuer[-regexp])")
	}
	// The rest is verify's own reading of its inputs.
	ctx := c.Context()
	in, err := vf.inputs(ctx, args)
	if err != nil {
		return nil, inputError(ctx, err)
	}
	vr := in.v.Complete(ctx, in.checked, in.arts)
	if ctx.Err() != nil {
		return nil, interrupted()
	}
	rep, err := report.FromVerification(f.verify.bundlePath, vr, in.entries)
	if errors.Is(err, report.ErrNotVerified) {
		code := verifyExit(vr.Failure)
		if code == exitOK {
			code = exitFailed
		}
		w := c.ErrOrStderr()
		printVerifyChecks(w, vr, code)
		fmt.Fprintf(w, "%s: %v\n", textsafe.Line(f.verify.bundlePath), err)
		return nil, silentExit(code)
	}
	if err != nil {
		return nil, withCode(exitFailed, err)
	}
	return rep, nil
}

// appendStepSummary appends the run's Markdown summary to the file
// GITHUB_STEP_SUMMARY names, when it is set (GitHub Actions shows it on
// the job's page). A failure to do so is a warning, never the run's.
func appendStepSummary(w io.Writer, dir string) {
	path := os.Getenv("GITHUB_STEP_SUMMARY")
	if path == "" {
		return
	}
	err := func() error {
		rep, err := report.FromRunDir(dir)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := rep.WriteMarkdown(&b); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(append(b.Bytes(), '\n')); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}()
	if err != nil {
		fmt.Fprintf(w, "warning: writing the job summary to GITHUB_STEP_SUMMARY: %v\n", err)
	}
}
