package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/spf13/cobra"
)

// A release made by run --fleet holds a dispatch among its bundles:
// verify (--bundle FILE... or REF) recognises it and applies the
// dispatch's checks (attest/dispatch) instead of the policy, as fleet
// verify does.

// fleetOutput is the JSON output of a fleet release's verification
// (verify and fleet verify).
type fleetOutput struct {
	*dispatch.Report
	// Source is where the bundles were read.
	Source string `json:"source,omitempty"`
	// Files are the release's files as served (REF), each checked
	// against the dispatch's subjects.
	Files []oci.File `json:"files,omitempty"`
	// FilesDir and LayoutDir are where pull wrote the files and the OCI
	// layout copy; empty when nothing was written.
	FilesDir  string `json:"files_dir,omitempty"`
	LayoutDir string `json:"layout_dir,omitempty"`
	ExitCode  int    `json:"exit_code"`
}

// fleetMode checks that verify's flags make sense for a fleet release
// (the dispatch's checks replace the policy, and no VSA is signed).
func (f *verifyFlags) fleetMode() error {
	switch {
	case f.policyPath != "":
		return usageErr("--policy: the bundles hold a fleet dispatch, whose checks replace the policy\nhint: drop --policy; the dispatch's jobs, their keys, hardware and target coverage are checked")
	case f.signKey != "" || f.vsaOut != "":
		return usageErr("--sign-key and --vsa-out: no VSA is signed for a fleet dispatch yet\nhint: drop them; verify prints every job and its verdict")
	}
	return nil
}

// verifyFleetBundles verifies the bundles read by verify --bundle, which
// hold a dispatch, with the artifacts given.
func verifyFleetBundles(c *cobra.Command, f *verifyFlags, in verifyInputs) error {
	if err := f.fleetMode(); err != nil {
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
	r, err := dispatch.VerifyEntries(c.Context(), in.entries, owner, dispatch.Options{AllowSimulated: f.allowSimulated, Artifacts: in.arts, RequireArtifacts: f.requireArtifacts,
		GPUEvidence: gopts, RequireGPUEvidence: f.requireGPUEvidence})
	if err != nil {
		return inputError(c.Context(), err)
	}
	return renderFleet(c.OutOrStdout(), *f.output, r, &oci.Fetched{Source: strings.Join(f.bundles(), ", ")}, true, pullDest{})
}

// verifyFleetRelease verifies the release ref names, whose bundle
// referrers hold a dispatch: the dispatch and node bundles among them,
// and the dispatch's subjects against the files served. For pull it then
// writes dest, only when that passed.
func verifyFleetRelease(c *cobra.Command, f *verifyFlags, ref string, rf *registryFlags, dest pullDest) error {
	if err := f.fleetMode(); err != nil {
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
	o := dispatch.Options{AllowSimulated: f.allowSimulated, GPUEvidence: gopts, RequireGPUEvidence: f.requireGPUEvidence}
	r, read, err := verifyFleetRef(c, ref, owner, o, rf, dest)
	if err != nil {
		return refError(c.Context(), read != nil, err)
	}
	return renderFleet(c.OutOrStdout(), *f.output, r, read, false, dest)
}

// renderFleet prints a fleet release's report (text or json), what was
// read and, for pull (dest), what was written, and returns the exit error
// its failure maps to.
func renderFleet(w io.Writer, output string, r *dispatch.Report, read *oci.Fetched, artifacts bool, dest pullDest) error {
	code := verifyExit(r.Failure)
	source := textsafe.Line(read.Source)
	if output == "json" {
		out := fleetOutput{Report: r, Source: source, Files: read.Files, FilesDir: read.FilesDir, LayoutDir: read.LayoutDir, ExitCode: code}
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		if source != "" {
			fmt.Fprintf(w, "Verifying a fleet release from %s: its dispatch, then every job's node bundle\n", source)
		}
		printFleetReport(w, r)
		if artifacts {
			if r.Artifacts == 0 {
				fmt.Fprintf(w, "Note: %s (no ARTIFACT given: no file was compared with the dispatch's subjects)\n", verify.NoArtifacts)
			} else {
				fmt.Fprintf(w, "%d artifact(s) checked against the dispatch's subjects\n", r.Artifacts)
			}
		}
		printPulled(w, read, code, dest)
	}
	if code != exitOK {
		return silentExit(code)
	}
	return nil
}

// printPulled says what pull wrote of a fleet release, or that it wrote
// nothing, and that the verification failed.
func printPulled(w io.Writer, read *oci.Fetched, code int, dest pullDest) {
	if read.FilesDir != "" {
		fmt.Fprintf(w, "Wrote %d file(s), each a subject of the dispatch, to %s\n", len(read.Files), textsafe.Line(read.FilesDir))
	}
	if read.LayoutDir != "" {
		n := 0
		for _, e := range read.Entries {
			if e.Problem == "" {
				n++
			}
		}
		fmt.Fprintf(w, "Copied the release, its dispatch and its node bundles (%d bundle(s)) to %s%s\n", n, oci.LayoutPrefix, textsafe.Line(read.LayoutDir))
	}
	if code != exitOK {
		if dest.any() {
			fmt.Fprintln(w, "Nothing was written.")
		}
		fmt.Fprintf(w, "Verification FAILED (exit %d)\n", code)
	}
}
