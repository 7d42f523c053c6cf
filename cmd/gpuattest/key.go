package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func init() { verbs = append(verbs, newKeyCmd) }

func newKeyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "key",
		Short: "Manage signing keys",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newKeyGenerateCmd())
	return c
}

func newKeyGenerateCmd() *cobra.Command {
	var prefix string
	var noPassword bool
	c := &cobra.Command{
		Use:   "generate",
		Short: "Generate a cosign-compatible key pair (NAME.key, NAME.pub)",
		Long: `Generate an ECDSA P-256 key pair: NAME.key is the private key, encrypted in
cosign's format (readable by cosign), mode 0600; NAME.pub is the PEM public
key. The password comes from GPUATTEST_PASSWORD (or COSIGN_PASSWORD), else an
interactive prompt; an empty password needs --no-password.`,
		Args: cobra.NoArgs,
	}
	out := outputFlag(c)
	c.Flags().StringVar(&prefix, "output-key-prefix", "gpuattest", "write NAME.key and NAME.pub")
	c.Flags().BoolVar(&noPassword, "no-password", false, "encrypt the private key with an empty password")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		if prefix == "" {
			return usageErr("--output-key-prefix: empty")
		}
		pw, err := keyPassword(c, true, noPassword)
		if err != nil {
			return err
		}
		files, err := sign.GenerateKeyPair(prefix, pw)
		if err != nil {
			return withCode(exitFailed, err)
		}
		if *out == "json" {
			return writeJSON(c.OutOrStdout(), map[string]string{"private_key": files.Private, "public_key": files.Public})
		}
		fmt.Fprintf(c.OutOrStdout(), "Private key written to %s\nPublic key written to %s\n", files.Private, files.Public)
		return nil
	}
	return c
}

// keyPassword returns the password of a private key: --no-password gives
// an empty one; else GPUATTEST_PASSWORD, then COSIGN_PASSWORD (an empty
// value counts); else a prompt when stdin is a terminal (twice when
// confirm is set). Otherwise it is an error when confirm is set (making a
// key) and an empty password when not (loading one).
func keyPassword(c *cobra.Command, confirm, noPassword bool) ([]byte, error) {
	if noPassword {
		return []byte{}, nil
	}
	for _, k := range []string{"GPUATTEST_PASSWORD", "COSIGN_PASSWORD"} {
		if v, ok := os.LookupEnv(k); ok {
			return []byte(v), nil
		}
	}
	f, ok := c.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		if confirm {
			return nil, usageErr("no password for the private key\nhint: set GPUATTEST_PASSWORD, run in a terminal to be prompted, or pass --no-password")
		}
		return []byte{}, nil
	}
	read := func(prompt string) ([]byte, error) {
		fmt.Fprint(c.ErrOrStderr(), prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.ErrOrStderr())
		if err != nil {
			return nil, fmt.Errorf("reading password: %w", err)
		}
		return b, nil
	}
	pw, err := read("Enter password for private key: ")
	if err != nil || !confirm {
		return pw, err
	}
	again, err := read("Enter password for private key again: ")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(pw, again) {
		return nil, withCode(exitFailed, errors.New("passwords do not match"))
	}
	return pw, nil
}
