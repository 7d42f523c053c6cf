package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newVerifyCmd) }

// verifyFlags are verify's flags.
type verifyFlags struct {
	output                                                      *string
	bundlePath, keyPath, trustedRoot, predicateType, policyPath string
	san, sanRE, issuer, issuerRE                                string
	maxPredicateSize                                            string
	maxPolicyCost                                               uint64
	requireArtifacts, allowSimulated                            bool
	signKey, vsaOut                                             string
	// GPU evidence: --gpu-root, --rim-root, --rim-store,
	// --require-gpu-evidence.
	gpuRoot, rimRoot, rimStore string
	requireGPUEvidence         bool
	// bundlePaths are verify's --bundle flags (it takes several; report
	// takes one, bundlePath).
	bundlePaths []string
}

// bundles returns the bundle files given.
func (f *verifyFlags) bundles() []string {
	if len(f.bundlePaths) > 0 {
		return f.bundlePaths
	}
	if f.bundlePath != "" {
		return []string{f.bundlePath}
	}
	return nil
}

func newVerifyCmd() *cobra.Command {
	var f verifyFlags
	c := &cobra.Command{
		Use:   "verify --bundle FILE [--key PUB | --certificate-identity ID --certificate-oidc-issuer URL] [ARTIFACT...] | verify REF [--key PUB | ...]",
		Short: "Verify signed attestations offline against a policy",
		Long: `Verify Sigstore bundles of in-toto statements: the signature (a public key,
or a Fulcio certificate with the given identity chaining to --trusted-root),
transparency log and timestamps as the trusted material requires, that each
ARTIFACT's sha256 is a subject of a bundle of the predicate type, and a policy
(CEL rules over the predicate). The default policy: every step passed, every
gpu: true step ran with backend cuda on a real GPU, and every pinned target
is covered by a passing GPU run of its compute capability across all the
bundles given; --policy builtin:cpu-tier accepts runs on the CPU backend,
--allow-simulated accepts simulated GPUs (for tests and demos). --bundle
takes one bundle or a JSON Lines file of many, and may be given several
times: a release validated on several machines verifies with all their
bundles. Nothing is fetched over the network. Without ARTIFACT no file is compared with the
subjects: verify says "0 artifacts checked", and fails with
--require-artifacts.

Every ARTIFACT, --bundle and --policy must be a regular file. Inputs are
bounded: a signed statement may be --max-predicate-size bytes (a bundle its
base64 size plus 1 MiB, the bundle file 8 such bundles), the policy may cost
--max-policy-cost units over all bundles; past a limit verify stops and
says which (exit 1). Ctrl-C or SIGTERM stops it at once (exit 130).

Without --bundle, REF names a release published with gpuattest push
(REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST], or oci-layout:DIR for an
offline copy, which touches no network): its bundle referrers are verified
the same way, and every file of the release and the release manifest
itself, hashed as the registry serves them, must be subjects. The
manifest must hash to the digest asked for (and the registry's
Docker-Content-Digest); no file is fetched before a verified bundle names
the manifest; files are bounded by --max-layer-size and --max-total-size,
requests by --registry-connect-timeout, --registry-idle-timeout and
--registry-timeout.

A release made by run --fleet holds a signed fleet dispatch among its
bundles; verify (--bundle FILE... or REF) recognises it and applies the
dispatch's checks instead of the policy, as fleet verify does: the
dispatch is signed by --key or the identity; each node bundle is signed
by the key the dispatch delegated to its job and carries the job's nonce
(a bundle signed by any other key, the release key included, counts for
no job); every job reports exactly once; each node's GPUs match its
class; every pinned target is covered. It prints every job with its
scheduler job ID, node and verdict; each ARTIFACT must be a subject of the
dispatch. --policy, --sign-key and --vsa-out are refused for such a
release, and with --predicate-type set to another type the dispatch is
not looked for.

Exit codes: 0 verified, 1 error, 10 signature or identity, 11 subject
mismatch, 12 policy failed (predicate type included; for a fleet release
a job missing, duplicated, foreign, failed or on the wrong hardware, or a
target not covered, named), 130 interrupted.`,
	}
	rf := addRegistryFlags(c)
	rf.addReadFlags(c)
	f.output = outputFlag(c)
	c.Flags().StringArrayVar(&f.bundlePaths, "bundle", nil, "Sigstore bundle, or JSON Lines of bundles (attestations.intoto.jsonl); repeat for several files")
	f.addFlags(c, "")
	f.addVSAFlags(c, "with --sign-key: write a signed SLSA VSA (https://slsa.dev/verification_summary/v1) of a successful verification to this file")
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(f.bundlePaths) == 0 && len(args) > 0 {
			if f.signKey != "" || f.vsaOut != "" {
				return usageErr("--sign-key and --vsa-out work with --bundle FILE, not with a registry REF")
			}
			return runVerifyRef(c, &f, rf, args, pullDest{})
		}
		return runVerify(c, &f, args)
	}
	return c
}

// addFlags adds the flags that say how bundles are verified (all but
// --bundle and -o) to c, each help text after prefix; verify and
// report --bundle share them.
func (f *verifyFlags) addFlags(c *cobra.Command, prefix string) {
	fl := c.Flags()
	fl.StringVar(&f.keyPath, "key", "", prefix+"PEM public key the bundles are signed with")
	fl.StringVar(&f.trustedRoot, "trusted-root", "", prefix+"Sigstore trusted root JSON (Fulcio CAs, Rekor logs, TSAs)")
	fl.StringVar(&f.san, "certificate-identity", "", prefix+"keyless: expected certificate SAN (email or URI)")
	fl.StringVar(&f.sanRE, "certificate-identity-regexp", "", prefix+"keyless: regexp the certificate SAN must match")
	fl.StringVar(&f.issuer, "certificate-oidc-issuer", "", prefix+"keyless: expected OIDC issuer of the certificate")
	fl.StringVar(&f.issuerRE, "certificate-oidc-issuer-regexp", "", prefix+"keyless: regexp the OIDC issuer must match")
	fl.StringVar(&f.predicateType, "predicate-type", attest.ValidationPredicateType, prefix+"predicate type the bundles must have")
	fl.StringVar(&f.policyPath, "policy", "", prefix+"policy file (YAML, kind Policy) or builtin:cpu-tier; default: every step passed on real GPUs, every pinned target covered")
	fl.BoolVar(&f.allowSimulated, "allow-simulated", false, prefix+"accept simulated GPUs (GPUATTEST_FAKE_GPU), for tests and demos: they pass the policy and count for coverage")
	fl.StringVar(&f.maxPredicateSize, "max-predicate-size", limits.Human(verify.DefaultMaxPredicateSize), prefix+"largest signed statement (predicate and subjects) to verify, such as 16MiB")
	fl.Uint64Var(&f.maxPolicyCost, "max-policy-cost", policy.DefaultCostLimit, prefix+"most the policy may cost over all bundles, in CEL cost units")
	fl.BoolVar(&f.requireArtifacts, "require-artifacts", false, prefix+"fail (exit 11) when no ARTIFACT is given; without it verify says \"0 artifacts checked\"")
	fl.StringVar(&f.gpuRoot, "gpu-root", "", prefix+"GPU evidence: device root certificate (PEM) instead of the pinned NVIDIA Device Identity CA (a simulated GPU's test root)")
	fl.StringVar(&f.rimRoot, "rim-root", "", prefix+"GPU evidence: RIM root certificate (PEM) instead of the pinned NVIDIA RIM root")
	fl.StringVar(&f.rimStore, "rim-store", "", prefix+"GPU evidence: directory of RIMs (<RIM ID>.xml) and OCSP answers (*.ocsp), such as a run directory's gpu-evidence/")
	fl.BoolVar(&f.requireGPUEvidence, "require-gpu-evidence", false, prefix+"fail when a GPU of a validation statement did not sign its evidence with its device key (unattested, or none recorded)")
}

// fleetRelease reports whether entries, read from the release whose
// manifest digest is manifest ("" for bundle files), are a fleet
// release's, to verify with the dispatch's checks: the predicate type
// asked for is the default and the owner signed a dispatch of this
// release (dispatch.FleetRelease). A dispatch anyone else added leaves the
// release ordinary.
func (f *verifyFlags) fleetRelease(ctx context.Context, entries []verify.Entry, manifest string) bool {
	if f.predicateType != attest.ValidationPredicateType || !dispatch.HasDispatch(entries) {
		return false
	}
	owner, err := f.ownerOptions()
	if err != nil {
		return false // the ordinary verification reports it
	}
	return dispatch.FleetRelease(ctx, entries, owner, f.predicateType, manifest)
}

// keyless reports whether an identity flag is set.
func (f *verifyFlags) keyless() bool {
	return f.san != "" || f.sanRE != "" || f.issuer != "" || f.issuerRE != ""
}

// check refuses contradictory or missing flags (usage errors).
func (f *verifyFlags) check() error {
	if err := checkOutput(*f.output); err != nil {
		return err
	}
	if len(f.bundles()) == 0 {
		return usageErr("--bundle FILE is required")
	}
	return f.checkMaterial()
}

// checkMaterial refuses contradictory or missing verification material
// (usage errors).
func (f *verifyFlags) checkMaterial() error {
	keyless := f.keyless()
	if f.keyPath != "" && keyless {
		return usageErr("--key and --certificate-identity/--certificate-oidc-issuer are exclusive")
	}
	if f.keyPath == "" && !keyless {
		return usageErr("no verification material\nhint: give --key PUB, or --trusted-root FILE with --certificate-identity and --certificate-oidc-issuer")
	}
	if keyless && (f.san == "" && f.sanRE == "" || f.issuer == "" && f.issuerRE == "") {
		return usageErr("keyless verification needs both an identity (--certificate-identity[-regexp]) and an issuer (--certificate-oidc-issuer[-regexp])")
	}
	return nil
}

// ownerOptions are the trust material of the verify flags: the key, or a
// certificate identity, and the trusted root when given. They verify a
// dispatch's signature, and verify's bundles (verifierOptions).
func (f *verifyFlags) ownerOptions() ([]verify.Option, error) {
	var opts []verify.Option
	if f.keyPath != "" {
		pub, err := sign.LoadPublicKey(f.keyPath)
		if err != nil {
			return nil, err
		}
		opts = append(opts, verify.WithKey(pub, f.keyPath))
	} else {
		opts = append(opts, verify.WithCertificateIdentity(f.san, f.sanRE, f.issuer, f.issuerRE))
	}
	if f.trustedRoot != "" {
		data, err := limits.ReadFile(f.trustedRoot, maxTrustedRoot, "trusted root")
		var tr *root.TrustedRoot
		if err == nil {
			tr, err = root.NewTrustedRootFromJSON(data)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading trusted root: %w", f.trustedRoot, err)
		}
		opts = append(opts, verify.WithTrustedRoot(tr, f.trustedRoot))
	}
	return opts, nil
}

// verifier loads the key, trusted root and policy the flags name and
// builds the verifier.
func (f *verifyFlags) verifier() (*verify.Verifier, error) {
	maxPred, err := parseMaxSize(f.maxPredicateSize)
	if err != nil {
		return nil, err
	}
	if f.maxPolicyCost == 0 {
		return nil, usageErr("--max-policy-cost: expected a positive number of units")
	}
	opts := []verify.Option{
		verify.WithPredicateType(f.predicateType),
		verify.WithMaxPredicateSize(maxPred),
		verify.WithPolicyCostLimit(f.maxPolicyCost),
	}
	if f.predicateType != dispatch.PredicateType && f.predicateType != dispatch.NodePredicateType {
		// A fleet release's bundles are judged by the dispatch's checks
		// (fleetRelease); beside an ordinary release they are no part
		// of its verification, whoever signed them.
		opts = append(opts, verify.WithLeftOut(dispatch.PredicateType, dispatch.NodePredicateType))
	}
	if f.requireArtifacts {
		opts = append(opts, verify.WithArtifactsRequired())
	}
	if f.allowSimulated {
		opts = append(opts, verify.WithSimulatedAllowed())
	}
	trust, err := f.ownerOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, trust...)
	if f.gpuRoot != "" || f.rimRoot != "" || f.rimStore != "" {
		gopts, err := gpuEvidenceOptions(f.gpuRoot, f.rimRoot, f.rimStore)
		if err != nil {
			return nil, err
		}
		opts = append(opts, verify.WithGPUEvidence(gopts...))
	}
	if f.requireGPUEvidence {
		opts = append(opts, verify.WithGPUEvidenceRequired())
	}
	if f.policyPath != "" {
		p, err := policy.Open(f.policyPath, f.allowSimulated)
		if err != nil {
			return nil, err
		}
		opts = append(opts, verify.WithPolicy(p))
	}
	return verify.New(opts...)
}

// parseMaxSize parses --max-predicate-size (of verify or sign).
func parseMaxSize(s string) (int64, error) {
	n, err := pipeline.ParseSize(s)
	if err != nil || n == 0 || n > math.MaxInt64 {
		return 0, usageErr("--max-predicate-size %q: expected a size such as 16MiB", s)
	}
	return int64(n), nil
}

// maxTrustedRoot is the largest trusted root file read.
const maxTrustedRoot = 4 << 20

func runVerify(c *cobra.Command, f *verifyFlags, args []string) error {
	if err := f.check(); err != nil {
		return err
	}
	signer, err := f.vsaSigner(c, true)
	if err != nil {
		return err
	}
	ctx := c.Context()
	in, err := f.inputs(ctx, args)
	if err != nil {
		return inputError(ctx, err)
	}
	if f.fleetRelease(ctx, in.entries, "") {
		return verifyFleetBundles(c, f, in)
	}
	w := c.OutOrStdout()
	if *f.output == "text" {
		fmt.Fprintf(w, "Verifying %d bundle(s) from %s against these criteria:\n", len(in.entries), textsafe.Line(strings.Join(f.bundles(), ", ")))
		printVerifyCriteria(w, in.v.Criteria(in.arts))
		fmt.Fprintln(w)
	}
	// Complete checks ctx between steps; a step that is not
	// interruptible (decoding a large predicate) does not hold the exit
	// back.
	done := make(chan *verify.Report, 1)
	go func() { done <- in.v.Complete(ctx, in.checked, in.arts) }()
	var rep *verify.Report
	select {
	case rep = <-done:
	case <-ctx.Done():
		return interrupted()
	}
	if ctx.Err() != nil {
		return interrupted()
	}
	code := verifyExit(rep.Failure)
	out := verifyOutput{Report: rep, ExitCode: code}
	if signer != nil && rep.Verified {
		if err := f.signVerifyVSA(c, signer, rep, in.entries); err != nil {
			return withCode(exitFailed, err)
		}
		out.VSA = f.vsaOut
	}
	if *f.output == "json" {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		printVerifyChecks(w, rep, code)
		switch {
		case out.VSA != "":
			fmt.Fprintf(w, "VSA (%s) signed: %s\n", attest.VSAPredicateType, textsafe.Line(out.VSA))
		case signer != nil:
			fmt.Fprintf(w, "No VSA written to %s: the verification failed\n", textsafe.Line(f.vsaOut))
		}
	}
	if code != exitOK {
		return silentExit(code)
	}
	return nil
}

// verifyInputs are verify's inputs read, and its bundles checked.
type verifyInputs struct {
	v       *verify.Verifier
	entries []verify.Entry
	checked *verify.Checked
	arts    []verify.Artifact
}

// inputs builds the verifier, reads and checks the bundles and hashes
// the artifacts.
func (f *verifyFlags) inputs(ctx context.Context, args []string) (verifyInputs, error) {
	// The artifacts are hashed (most of a verify's work) on this
	// goroutine, which is running now, while another sets up the verifier,
	// reads the bundles and checks their signatures: a goroutine started
	// for the hashing could wait milliseconds for a thread. The setup's
	// errors still come first, and stop the hashing; a hashing error
	// stops the checks.
	hashCtx, stopHashing := context.WithCancel(ctx)
	defer stopHashing()
	checkCtx, stopChecks := context.WithCancel(ctx)
	defer stopChecks()
	type setUp struct {
		in  verifyInputs
		err error
	}
	ready := make(chan setUp, 1)
	go func() {
		var in verifyInputs
		v, err := f.verifier()
		for _, b := range f.bundles() {
			if err != nil {
				break
			}
			var e []verify.Entry
			e, err = v.ReadBundles(ctx, b)
			in.entries = append(in.entries, e...)
		}
		if err != nil {
			stopHashing()
			ready <- setUp{err: err}
			return
		}
		in.v, in.checked = v, v.CheckBundles(checkCtx, in.entries)
		ready <- setUp{in: in}
	}()
	arts, hashErr := verify.DigestFiles(hashCtx, args)
	if hashErr != nil {
		stopChecks()
	}
	var s setUp
	select {
	case s = <-ready:
	case <-ctx.Done():
		// A bundle's signature check is not interruptible; it does not
		// hold the exit back.
		return verifyInputs{}, ctx.Err()
	}
	switch {
	case s.err != nil:
		return verifyInputs{}, s.err
	case hashErr != nil:
		return verifyInputs{}, hashErr
	}
	s.in.arts = arts
	return s.in, nil
}

// inputError is the exit error for a failure to read verify's inputs:
// interrupted, the usage error it is, or a failure (exit 1).
func inputError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return interrupted()
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return withCode(exitFailed, err)
}

// interrupted is the error of a verification stopped by a signal.
func interrupted() error {
	return withCode(exitInterrupted, errors.New("interrupted: nothing was verified"))
}

func printVerifyCriteria(w io.Writer, crit []verify.Criterion) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, cr := range crit {
		fmt.Fprintf(tw, "  - %s\t%s\n", textsafe.Line(cr.Check), textsafe.Line(cr.Requirement))
	}
	tw.Flush()
}

// verifyOutput is verify's JSON output: the report and the exit code.
type verifyOutput struct {
	*verify.Report
	// VSA is the VSA bundle written (--vsa-out), if any.
	VSA      string `json:"vsa,omitempty"`
	ExitCode int    `json:"exit_code"`
}

// signVerifyVSA signs the VSA of a verification and writes it to
// --vsa-out.
func (f *verifyFlags) signVerifyVSA(c *cobra.Command, signer *sign.Signer, rep *verify.Report, entries []verify.Entry) error {
	pol, err := f.vsaPolicy("https://gpuattest.dev/policy/" + verifyPolicyName(rep.Policy))
	if err != nil {
		return err
	}
	st, err := verify.VSA(rep, entries, pol, buildVersion().Version)
	if err != nil {
		return err
	}
	return writeVSA(c, signer, st, f.vsaOut)
}

func printVerifyChecks(w io.Writer, rep *verify.Report, code int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ch := range rep.Checks {
		mark := "PASS"
		if !ch.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, textsafe.Line(ch.Check), textsafe.Line(ch.Target), verifyOneLine(ch.Detail))
	}
	tw.Flush()
	fmt.Fprintln(w)
	arts := fmt.Sprintf("%d artifact(s)", len(rep.Artifacts))
	if len(rep.Artifacts) == 0 {
		arts = verify.NoArtifacts + " (no ARTIFACT given: no file was compared with the subjects)"
	}
	if rep.Verified {
		fmt.Fprintf(w, "Verified OK: %d bundle(s), %s, predicate %s, policy %s\n", len(rep.Bundles), arts, textsafe.Line(rep.PredicateType), textsafe.Line(verifyPolicyName(rep.Policy)))
		if rep.SimulatedAccepted {
			fmt.Fprintf(w, "WARNING: %s\n", verify.SimulatedAccepted)
		}
		return
	}
	what := map[verify.Failure]string{
		verify.FailureError:     "error",
		verify.FailureSignature: "signature or identity",
		verify.FailureSubject:   "subject mismatch",
		verify.FailurePolicy:    "policy failed",
	}[rep.Failure]
	fmt.Fprintf(w, "Verification FAILED: %s (exit %d)\n", what, code)
	if len(rep.Artifacts) == 0 {
		fmt.Fprintf(w, "Note: %s\n", arts)
	}
}

// verifyOneLine puts a detail (a message and its hint) on one line.
func verifyOneLine(s string) string { return textsafe.Line(strings.ReplaceAll(s, "\n", " ")) }

func verifyPolicyName(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
