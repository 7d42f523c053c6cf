package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline/rebuild"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newRebuildCmd) }

// rebuildFlags are rebuild's flags besides verify's.
type rebuildFlags struct {
	verifyFlags
	source, out string
	unsandboxed bool
}

func newRebuildCmd() *cobra.Command {
	var f rebuildFlags
	c := &cobra.Command{
		Use:   "rebuild --bundle FILE (--key PUB | identity flags) --source DIR [--out DIR] [--sign-key KEY [--vsa-out FILE]] [ARTIFACT...]",
		Short: "Rebuild a signed build from its source and compare every artifact",
		Long: `Verify the bundles (as verify does, for the SLSA provenance predicate), check
that --source DIR is a clean git work tree at the commit the provenance
records (else "source does not match the provenance", before anything is
built), copy its tracked files into a fresh directory, run the recorded
cuda-build steps (and the exec steps they need) there in the pipeline's
pinned images, or on the host when this host's nvcc, cicc, ptxas and
fatbinary have the recorded digests, and compare every subject's digest.

When an artifact differs, it is explained by ELF section and embedded
string, as reproducible: check does: against its original when one is
given as ARTIFACT (each ARTIFACT must be a subject, as for verify), else
against a second rebuild.

With --sign-key, a SLSA Verification Summary Attestation
(https://slsa.dev/verification_summary/v1) of the outcome is signed into a
Sigstore bundle (--vsa-out, default DIR/vsa.sigstore.json in the rebuild
directory).

Exit codes: 0 every artifact rebuilt bit for bit, 1 error (the source or
toolchain does not match, a step ran in another image, a build step
failed), 2 usage, 10-12 as verify,
13 an artifact differs, 130 interrupted.`,
		Args: cobra.ArbitraryArgs,
	}
	f.output = outputFlag(c)
	c.Flags().StringVar(&f.bundlePath, "bundle", "", "Sigstore bundle, or JSON Lines of bundles (attestations.intoto.jsonl), holding the SLSA provenance")
	f.addFlags(c, "")
	f.predicateType = attest.ProvenancePredicateType
	c.Flags().Lookup("predicate-type").DefValue = attest.ProvenancePredicateType
	c.Flags().StringVar(&f.source, "source", "", "git work tree to rebuild from: a clean checkout of the recorded commit")
	c.Flags().StringVar(&f.out, "out", "", "directory for the rebuild (a copy of the source and its run directory; default: a new temporary directory)")
	c.Flags().BoolVar(&f.unsandboxed, "unsandboxed", false, "run the source's host build steps directly on this host, with its network and files, instead of in the bwrap sandbox (only for a source you trust)")
	f.addVSAFlags(c, "where --sign-key writes the VSA bundle (default: vsa.sigstore.json in the rebuild directory)")
	c.RunE = func(c *cobra.Command, args []string) error { return runRebuild(c, &f, args) }
	return c
}

// unsandboxedWarning is what rebuild --unsandboxed prints before it
// builds.
const unsandboxedWarning = `WARNING: --unsandboxed: the source's host build steps run directly on this host.
  Any code the commit carries (a -ccbin script, an exec step) runs as this
  user, with the network, this user's files, credentials and environment,
  and write access to everything this user may write. A signed provenance
  says who built it, not that its source is harmless. Use --unsandboxed
  only for a source you trust as your own.
`

func runRebuild(c *cobra.Command, f *rebuildFlags, args []string) error {
	if err := f.check(); err != nil {
		return err
	}
	if f.source == "" {
		return usageErr("--source DIR is required: the git work tree to rebuild from")
	}
	if f.predicateType != attest.ProvenancePredicateType {
		return usageErr("--predicate-type %q: rebuild reads the SLSA provenance (%s)", f.predicateType, attest.ProvenancePredicateType)
	}
	signer, err := f.vsaSigner(c, false)
	if err != nil {
		return err
	}
	ctx := c.Context()
	in, err := f.inputs(ctx, args)
	if err != nil {
		return inputError(ctx, err)
	}
	w := c.OutOrStdout()
	vr := in.v.Complete(ctx, in.checked, in.arts)
	if !vr.Verified {
		code := verifyExit(vr.Failure)
		if *f.output == "json" {
			return errors.Join(writeJSON(w, rebuildOutput{Verify: vr, ExitCode: code}), silentExit(code))
		}
		printVerifyChecks(w, vr, code)
		return silentExit(code)
	}
	pi, err := provenanceOf(vr)
	if err != nil {
		return withCode(exitFailed, err)
	}
	prov := vr.Bundles[pi].Statement()
	warn := func(s string) { fmt.Fprintln(c.ErrOrStderr(), "warning: "+textsafe.Line(s)) }
	originals := map[string]string{}
	for i, a := range in.arts {
		originals[a.SHA256] = args[i]
	}
	ropts := []rebuild.Option{rebuild.WithOutDir(f.out), rebuild.WithOriginals(originals),
		rebuild.WithRunOptions(run.WithWarnings(warn), run.WithVersion(buildVersion().Version))}
	if f.unsandboxed {
		fmt.Fprint(c.ErrOrStderr(), unsandboxedWarning)
		ropts = append(ropts, rebuild.WithoutSandbox())
	}
	rep, err := rebuild.Run(ctx, prov, f.source, ropts...)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return withCode(exitFailed, err)
	}
	out := rebuildOutput{Verify: vr, Rebuild: rep, ExitCode: exitOK}
	if !rep.Match {
		out.ExitCode = exitDiffer
	}
	if signer != nil {
		if out.VSA, err = f.signVSA(c, signer, rep, vr, in.entries[pi]); err != nil {
			return withCode(exitFailed, err)
		}
	}
	if *f.output == "json" {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		printRebuild(w, &out)
	}
	if out.ExitCode != exitOK {
		return silentExit(out.ExitCode)
	}
	return nil
}

// provenanceOf is the index in vr.Bundles of the one SLSA provenance
// the verification judged (verified and, when artifacts were given,
// naming one of them). Several are refused: rebuild rebuilds one
// provenance, and a VSA must never name the subjects of another that
// was not rebuilt.
func provenanceOf(vr *verify.Report) (int, error) {
	var found []int
	for i := range vr.Bundles {
		b := &vr.Bundles[i]
		if st := b.Statement(); b.Judged && st != nil && st.PredicateType == attest.ProvenancePredicateType {
			found = append(found, i)
		}
	}
	switch len(found) {
	case 0:
		return 0, errors.New("no verified SLSA provenance to rebuild")
	case 1:
		return found[0], nil
	}
	var srcs []string
	for _, i := range found {
		srcs = append(srcs, vr.Bundles[i].Source)
	}
	return 0, fmt.Errorf("the bundles hold %d verified SLSA provenance statements (%s): rebuild rebuilds exactly one, so that its outcome and VSA name only what was rebuilt\nhint: give ARTIFACT arguments that only one provenance names, or a bundle file holding one provenance", len(found), strings.Join(srcs, ", "))
}

// signVSA signs the rebuild's VSA (about the artifacts of the provenance
// prov, which it rebuilt) and writes its bundle; it returns the file
// written.
func (f *rebuildFlags) signVSA(c *cobra.Command, signer *sign.Signer, rep *rebuild.Report, vr *verify.Report, prov verify.Entry) (string, error) {
	pol, err := f.vsaPolicy("https://gpuattest.dev/policy/rebuild/v1")
	if err != nil {
		return "", err
	}
	st, err := rebuild.VSA(rep, prov, vr.VerifiedAt, pol, buildVersion().Version)
	if err != nil {
		return "", err
	}
	file := f.vsaOut
	if file == "" {
		file = filepath.Join(rep.Dir, "vsa.sigstore.json")
	}
	return file, writeVSA(c, signer, st, file)
}

// addVSAFlags adds --sign-key and --vsa-out (whose help is vsaOutHelp).
func (f *verifyFlags) addVSAFlags(c *cobra.Command, vsaOutHelp string) {
	c.Flags().StringVar(&f.signKey, "sign-key", "", "private key (cosign format) to sign a SLSA VSA of the outcome with")
	c.Flags().StringVar(&f.vsaOut, "vsa-out", "", vsaOutHelp)
}

// vsaSigner unlocks --sign-key; nil without it. needOut requires
// --vsa-out with it.
func (f *verifyFlags) vsaSigner(c *cobra.Command, needOut bool) (*sign.Signer, error) {
	switch {
	case f.vsaOut != "" && f.signKey == "":
		return nil, usageErr("--vsa-out needs --sign-key KEY")
	case f.signKey == "":
		return nil, nil
	case needOut && f.vsaOut == "":
		return nil, usageErr("--sign-key needs --vsa-out FILE: where the VSA bundle goes")
	}
	return (&signFlags{key: f.signKey}).signer(c)
}

// vsaPolicy names the policy a VSA records: the --policy file by name
// and digest, else def.
func (f *verifyFlags) vsaPolicy(def string) (attest.VSAPolicy, error) {
	if f.policyPath == "" {
		return attest.VSAPolicy{URI: def}, nil
	}
	if name, ok := strings.CutPrefix(f.policyPath, "builtin:"); ok {
		return attest.VSAPolicy{URI: "https://gpuattest.dev/policy/" + name}, nil
	}
	sum, _, err := digest.File(f.policyPath)
	if err != nil {
		return attest.VSAPolicy{}, fmt.Errorf("digesting the policy: %w", err)
	}
	return attest.VSAPolicy{URI: filepath.ToSlash(filepath.Base(f.policyPath)), Digest: map[string]string{"sha256": sum}}, nil
}

// writeVSA signs st and writes the bundle to file.
func writeVSA(c *cobra.Command, signer *sign.Signer, st *attest.Statement, file string) error {
	b, err := signer.Sign(c.Context(), st)
	if err != nil {
		return fmt.Errorf("signing the VSA: %w", err)
	}
	return sign.WriteBundle(file, b)
}

// rebuildOutput is rebuild's JSON output.
type rebuildOutput struct {
	Verify   *verify.Report  `json:"verify"`
	Rebuild  *rebuild.Report `json:"rebuild,omitempty"`
	VSA      string          `json:"vsa,omitempty"`
	ExitCode int             `json:"exit_code"`
}

func printRebuild(w io.Writer, out *rebuildOutput) {
	rep := out.Rebuild
	fmt.Fprintf(w, "Verified %d bundle(s); rebuilt %s at %s (steps %s) in %s\n\n", len(out.Verify.Bundles), textsafe.Line(rep.Pipeline.Path),
		textsafe.Line(rep.Source.Commit), textsafe.Line(strings.Join(rep.Steps, ", ")), textsafe.Line(rep.Dir))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ARTIFACT\tEXPECTED\tREBUILT\tMATCH")
	for _, a := range rep.Artifacts {
		m := "yes"
		if !a.Match {
			m = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", textsafe.Line(a.Name), shortDigest(a.Expected), shortDigest(a.Rebuilt), m)
	}
	tw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", textsafe.Line(n))
	}
	if rep.Diff != nil {
		fmt.Fprintf(w, "\n%s\n", textsafe.Line(rep.DiffNote))
		for _, d := range rep.Diff.Differing {
			fmt.Fprintf(w, "%s\n", textsafe.Lines(d.Summary()))
		}
	}
	fmt.Fprintln(w)
	if out.VSA != "" {
		fmt.Fprintf(w, "VSA (%s) signed: %s\n", attest.VSAPredicateType, textsafe.Line(out.VSA))
	}
	if rep.Match {
		fmt.Fprintf(w, "Rebuilt OK: %d artifact(s) match the provenance\n", len(rep.Artifacts))
		return
	}
	n := 0
	for _, a := range rep.Artifacts {
		if !a.Match {
			n++
		}
	}
	fmt.Fprintf(w, "Rebuild DIFFERS: %d of %d artifact(s) do not match the provenance (exit %d)\n", n, len(rep.Artifacts), exitDiffer)
}

// shortDigest shows sha256:<first 12 hex digits>, or "-" for none.
func shortDigest(d string) string {
	if d == "" {
		return "-"
	}
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
