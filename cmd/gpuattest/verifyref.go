package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/spf13/cobra"
)

// pullDest is where pull writes what verified; empty for verify REF.
type pullDest struct {
	files, layout string
}

func (d pullDest) any() bool { return d.files != "" || d.layout != "" }

// runVerifyRef verifies the release args[0] names (verify REF, pull REF)
// and, for pull, writes it to dest once verified.
func runVerifyRef(c *cobra.Command, f *verifyFlags, rf *registryFlags, args []string, dest pullDest) error {
	if err := checkOutput(*f.output); err != nil {
		return err
	}
	if len(args) != 1 {
		return usageErr("--bundle FILE is required to verify %d files\nhint: or give one REF (or oci-layout:DIR) alone to verify a published release", len(args))
	}
	ref := args[0]
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		return usageErr("--bundle FILE is required to verify files (%s is a file, not a registry reference)\nhint: or give REF (or oci-layout:DIR) alone to verify a published release", textsafe.Line(ref))
	}
	if err := f.checkMaterial(); err != nil {
		return err
	}
	opts, err := rf.options()
	if err != nil {
		return err
	}
	v, err := f.verifier()
	if err != nil {
		return inputError(c.Context(), err)
	}
	w := c.OutOrStdout()
	if *f.output == "text" {
		opts = append(opts, oci.WithCriteria(func(cr oci.Criteria) {
			if f.fleetRelease(c.Context(), cr.Entries, manifestOf(cr.Source)) {
				return // verified below, with the dispatch's checks
			}
			fmt.Fprintf(w, "Verifying %d bundle(s) from %s against these criteria:\n", cr.Bundles, textsafe.Line(cr.Source))
			printVerifyCriteria(w, cr.Criteria)
			fmt.Fprintln(w)
		}))
	}
	if dest.files != "" {
		opts = append(opts, oci.WithFilesTo(dest.files))
	}
	if dest.layout != "" {
		opts = append(opts, oci.WithLayoutTo(dest.layout))
	}
	res, err := awaitRef(c.Context(), v, ref, opts, dest.any())
	if err != nil {
		return err
	}
	if f.fleetRelease(c.Context(), res.Entries, res.Digest) {
		// A fleet release: no bundle of the validation type names the
		// manifest, so no file was fetched nor written; read it again for
		// the dispatch's checks, and write it (pull) once they pass.
		return verifyFleetRelease(c, f, ref, rf, dest)
	}
	return renderRef(w, *f.output, res)
}

// manifestOf is the manifest digest of a release source,
// NAME@sha256:<hex>.
func manifestOf(source string) string {
	if i := strings.LastIndex(source, "@"); i >= 0 {
		return source[i+1:]
	}
	return ""
}

// awaitRef runs oci.Verify until it returns or a signal arrives: verify
// stops at once, pull waits for it to remove what it staged.
func awaitRef(ctx context.Context, v *verify.Verifier, ref string, opts []oci.Option, writes bool) (*oci.Result, error) {
	res, err := await(ctx, writes, func(ctx context.Context) (*oci.Result, error) {
		return oci.Verify(ctx, v, ref, opts...)
	})
	return res, refError(ctx, res != nil, err)
}

// refError maps the error of a verification that may write (pull) to its
// exit: one with a result failed writing what verified.
func refError(ctx context.Context, result bool, err error) error {
	var ee *exitError
	switch {
	case err == nil || errors.As(err, &ee):
		return err
	case !result:
		return inputError(ctx, err)
	}
	return withCode(exitFailed, fmt.Errorf("verified, but not written: %w", err))
}

// await runs fn until it returns or ctx ends (a signal): without writes it
// stops at once, with writes it waits for fn to remove what it staged.
// Either way an ended ctx is interrupted(); fn's error comes back as is.
func await[T any](ctx context.Context, writes bool, fn func(context.Context) (*T, error)) (*T, error) {
	type outcome struct {
		res *T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := fn(ctx)
		done <- outcome{res, err}
	}()
	var out outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		if writes {
			<-done
		}
		return nil, interrupted()
	}
	if ctx.Err() != nil {
		return nil, interrupted()
	}
	return out.res, out.err
}

// refOutput is verify REF's and pull's JSON output.
type refOutput struct {
	*oci.Result
	ExitCode int `json:"exit_code"`
}

func renderRef(w io.Writer, output string, res *oci.Result) error {
	code := verifyExit(res.Report.Failure)
	if output == "json" {
		if err := writeJSON(w, refOutput{Result: res, ExitCode: code}); err != nil {
			return err
		}
	} else {
		printVerifyChecks(w, res.Report, code)
		if res.SkippedCount > 0 {
			fmt.Fprintf(w, "Not checked: %d referrer(s) that are not Sigstore bundles\n", res.SkippedCount)
		}
		if res.NotFetched != "" {
			fmt.Fprintf(w, "Not fetched: %s\n", textsafe.Line(res.NotFetched))
		}
		if res.FilesDir != "" {
			fmt.Fprintf(w, "Wrote %d file(s) to %s\n", len(res.Files), textsafe.Line(res.FilesDir))
		}
		if res.LayoutDir != "" {
			fmt.Fprintf(w, "Copied the release and %d bundle(s) to %s%s\n", len(res.Report.Bundles), oci.LayoutPrefix, textsafe.Line(res.LayoutDir))
		}
		if code != exitOK && (res.FilesDir == "" && res.LayoutDir == "") {
			fmt.Fprintln(w, "Nothing was written.")
		}
	}
	if code != exitOK {
		return silentExit(code)
	}
	return nil
}
