package main

import (
	"fmt"
	"os"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newSignCmd) }

// signFlags are the signing flags shared by sign and run.
type signFlags struct {
	key           string
	keyless       bool
	signingConfig string
	identityToken string
	timestampURL  []string
	trustedRoot   string
}

// addSignFlags adds the signing flags to c.
func addSignFlags(c *cobra.Command) *signFlags {
	f := &signFlags{}
	c.Flags().StringVar(&f.key, "key", "", "private key file (cosign format) to sign with")
	c.Flags().BoolVar(&f.keyless, "keyless", false, "sign with a Fulcio certificate for an OIDC identity (needs --signing-config)")
	c.Flags().StringVar(&f.signingConfig, "signing-config", "", "Sigstore signing config v0.2 (Fulcio, Rekor, TSA URLs) for --keyless")
	c.Flags().StringVar(&f.identityToken, "identity-token", "", "OIDC token for --keyless, or @FILE (default: GitHub Actions ambient token)")
	c.Flags().StringArrayVar(&f.timestampURL, "timestamp-url", nil, "RFC 3161 timestamp authority URL (repeatable)")
	c.Flags().StringVar(&f.trustedRoot, "trusted-root", "", "with --keyless: verify each bundle against this trusted root after signing")
	return f
}

// set reports whether any signing was asked for.
func (f *signFlags) set() bool { return f.key != "" || f.keyless }

// readStatement reads a statement from a regular file or, for "-", from
// stdin, refusing one over limit bytes.
func readStatement(c *cobra.Command, path string, limit int64) ([]byte, error) {
	if path != "-" {
		return limits.ReadFile(path, limit, "statement")
	}
	return limits.ReadAll(c.InOrStdin(), limit, "stdin", "statement")
}

// signer builds the signer the flags describe, with extra options.
func (f *signFlags) signer(c *cobra.Command, extra ...sign.Option) (*sign.Signer, error) {
	opts := extra
	for _, u := range f.timestampURL {
		opts = append(opts, sign.WithTimestampURL(u))
	}
	switch {
	case f.key != "" && f.keyless:
		return nil, usageErr("--key and --keyless are exclusive")
	case f.key != "":
		if f.signingConfig != "" || f.identityToken != "" {
			return nil, usageErr("--signing-config and --identity-token need --keyless")
		}
		kp, err := loadPrivateKey(c, f.key)
		if err != nil {
			return nil, err
		}
		return sign.NewKeySigner(kp, opts...)
	case f.keyless:
		if f.signingConfig == "" {
			return nil, usageErr("--keyless needs --signing-config FILE\nhint: a Sigstore signing config v0.2 naming the Fulcio, Rekor and TSA to use")
		}
		sc, err := sign.LoadSigningConfig(f.signingConfig)
		if err != nil {
			return nil, withCode(exitFailed, err)
		}
		if f.trustedRoot != "" {
			tr, err := root.NewTrustedRootFromPath(f.trustedRoot)
			if err != nil {
				return nil, withCode(exitFailed, fmt.Errorf("%s: reading trusted root: %w", f.trustedRoot, err))
			}
			opts = append(opts, sign.WithTrustedRoot(tr))
		}
		tok, err := sign.IDToken(c.Context(), f.identityToken, os.Getenv, nil)
		if err != nil {
			return nil, withCode(exitFailed, err)
		}
		return sign.NewKeylessSigner(sc, tok, opts...)
	}
	return nil, usageErr("nothing to sign with\nhint: give --key FILE or --keyless --signing-config FILE")
}

func newSignCmd() *cobra.Command {
	var output, maxSize string
	c := &cobra.Command{
		Use:   "sign STATEMENT.json",
		Short: "Sign an in-toto statement into a Sigstore bundle",
		Long: `Sign an in-toto Statement v1 (JSON) into a Sigstore bundle v0.3 (DSSE).
The bundle goes to stdout, or to --output FILE; a FILE ending in .jsonl gets
the bundle appended as one line (atomically).`,
		Args: cobra.ExactArgs(1),
	}
	sf := addSignFlags(c)
	c.Flags().StringVarP(&output, "output", "o", "", "write the bundle to FILE (append when FILE ends in .jsonl)")
	c.Flags().StringVar(&maxSize, "max-predicate-size", limits.Human(attest.DefaultMaxStatementSize), "largest statement to sign, as verify's flag of the same name")
	c.RunE = func(c *cobra.Command, args []string) error {
		limit, err := parseMaxSize(maxSize)
		if err != nil {
			return err
		}
		payload, err := readStatement(c, args[0], limit)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("reading statement: %w", err))
		}
		s, err := sf.signer(c, sign.WithMaxStatementSize(limit))
		if err != nil {
			return err
		}
		b, err := s.SignPayload(c.Context(), payload)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("%s: %w", args[0], err))
		}
		if output == "" {
			_, err = fmt.Fprintf(c.OutOrStdout(), "%s\n", b)
		} else {
			err = sign.WriteBundle(output, b)
		}
		if err != nil {
			return withCode(exitFailed, err)
		}
		if output != "" {
			fmt.Fprintf(c.ErrOrStderr(), "Signed %s (%s) into %s\n", textsafe.Line(args[0]), textsafe.Line(s.Identity()), textsafe.Line(output))
		}
		return nil
	}
	return c
}
