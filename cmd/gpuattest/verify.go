package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/policy"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newVerifyCmd) }

func newVerifyCmd() *cobra.Command {
	var (
		bundlePath, keyPath, trustedRoot, predicateType, policyPath string
		san, sanRE, issuer, issuerRE                                string
	)
	c := &cobra.Command{
		Use:   "verify --bundle FILE [--key PUB | --certificate-identity ID --certificate-oidc-issuer URL] [ARTIFACT...]",
		Short: "Verify signed attestations offline against a policy",
		Long: `Verify Sigstore bundles of in-toto statements: the signature (a public key,
or a Fulcio certificate with the given identity chaining to --trusted-root),
transparency log and timestamps as the trusted material requires, that each
ARTIFACT's sha256 is a subject of a bundle of the predicate type, and a policy
(CEL rules over the predicate; default: every step passed, hardware not
simulated). --bundle takes one bundle or a JSON Lines file of many. Nothing is
fetched over the network.

Exit codes: 0 verified, 1 error, 10 signature or identity, 11 subject
mismatch, 12 policy failed (predicate type included).`,
	}
	out := outputFlag(c)
	fl := c.Flags()
	fl.StringVar(&bundlePath, "bundle", "", "Sigstore bundle, or JSON Lines of bundles (attestations.intoto.jsonl)")
	fl.StringVar(&keyPath, "key", "", "PEM public key the bundles are signed with")
	fl.StringVar(&trustedRoot, "trusted-root", "", "Sigstore trusted root JSON (Fulcio CAs, Rekor logs, TSAs)")
	fl.StringVar(&san, "certificate-identity", "", "keyless: expected certificate SAN (email or URI)")
	fl.StringVar(&sanRE, "certificate-identity-regexp", "", "keyless: regexp the certificate SAN must match")
	fl.StringVar(&issuer, "certificate-oidc-issuer", "", "keyless: expected OIDC issuer of the certificate")
	fl.StringVar(&issuerRE, "certificate-oidc-issuer-regexp", "", "keyless: regexp the OIDC issuer must match")
	fl.StringVar(&predicateType, "predicate-type", attest.ValidationPredicateType, "predicate type the bundles must have")
	fl.StringVar(&policyPath, "policy", "", "policy file (YAML, kind Policy); default: all steps passed, not simulated")
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		if bundlePath == "" {
			return usageErr("--bundle FILE is required")
		}
		keyless := san != "" || sanRE != "" || issuer != "" || issuerRE != ""
		if keyPath != "" && keyless {
			return usageErr("--key and --certificate-identity/--certificate-oidc-issuer are exclusive")
		}
		if keyPath == "" && !keyless {
			return usageErr("no verification material\nhint: give --key PUB, or --trusted-root FILE with --certificate-identity and --certificate-oidc-issuer")
		}
		if keyless && (san == "" && sanRE == "" || issuer == "" && issuerRE == "") {
			return usageErr("keyless verification needs both an identity (--certificate-identity[-regexp]) and an issuer (--certificate-oidc-issuer[-regexp])")
		}
		opts := []verify.Option{verify.WithPredicateType(predicateType)}
		if keyPath != "" {
			pub, err := sign.LoadPublicKey(keyPath)
			if err != nil {
				return withCode(exitFailed, err)
			}
			opts = append(opts, verify.WithKey(pub, keyPath))
		} else {
			opts = append(opts, verify.WithCertificateIdentity(san, sanRE, issuer, issuerRE))
		}
		if trustedRoot != "" {
			tr, err := root.NewTrustedRootFromPath(trustedRoot)
			if err != nil {
				return withCode(exitFailed, fmt.Errorf("%s: reading trusted root: %w", trustedRoot, err))
			}
			opts = append(opts, verify.WithTrustedRoot(tr, trustedRoot))
		}
		if policyPath != "" {
			p, err := policy.Load(policyPath)
			if err != nil {
				return withCode(exitFailed, err)
			}
			opts = append(opts, verify.WithPolicy(p))
		}
		v, err := verify.New(opts...)
		if err != nil {
			return withCode(exitFailed, err)
		}
		data, err := os.ReadFile(bundlePath)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("reading bundle: %w", err))
		}
		entries, err := verify.ParseBundles(bundlePath, data)
		if err != nil {
			return withCode(exitFailed, err)
		}
		var arts []verify.Artifact
		for _, a := range args {
			art, err := verify.DigestFile(a)
			if err != nil {
				return withCode(exitFailed, err)
			}
			arts = append(arts, art)
		}
		w := c.OutOrStdout()
		if *out == "text" {
			fmt.Fprintf(w, "Verifying %d bundle(s) from %s against these criteria:\n", len(entries), bundlePath)
			printVerifyCriteria(w, v.Criteria(arts))
			fmt.Fprintln(w)
		}
		rep := v.Verify(c.Context(), entries, arts)
		if *out == "json" {
			if err := writeJSON(w, rep); err != nil {
				return err
			}
		} else {
			printVerifyChecks(w, rep)
		}
		if rep.Code != verify.CodeVerified {
			return silentExit(rep.Code)
		}
		return nil
	}
	return c
}

func printVerifyCriteria(w io.Writer, crit []verify.Criterion) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, cr := range crit {
		fmt.Fprintf(tw, "  - %s\t%s\n", cr.Check, cr.Requirement)
	}
	tw.Flush()
}

func printVerifyChecks(w io.Writer, rep *verify.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ch := range rep.Checks {
		mark := "PASS"
		if !ch.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, ch.Check, ch.Target, verifyOneLine(ch.Detail))
	}
	tw.Flush()
	fmt.Fprintln(w)
	if rep.Verified {
		fmt.Fprintf(w, "Verified OK: %d bundle(s), %d artifact(s), predicate %s, policy %s\n", len(rep.Bundles), len(rep.Artifacts), rep.PredicateType, verifyPolicyName(rep.Policy))
		return
	}
	what := map[int]string{
		verify.CodeError:     "error",
		verify.CodeSignature: "signature or identity",
		verify.CodeSubject:   "subject mismatch",
		verify.CodePolicy:    "policy failed",
	}[rep.Code]
	fmt.Fprintf(w, "Verification FAILED: %s (exit %d)\n", what, rep.Code)
}

func verifyOneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func verifyPolicyName(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
