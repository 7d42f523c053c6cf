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
interactive prompt; an empty password needs --no-password. run --key, sign
and rebuild --sign-key use a key made with --no-password without asking: with
no password variable set they try the empty password first, and prompt only
when it fails.`,
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
		pw, err := newKeyPassword(c, noPassword)
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

// envPassword returns the password in GPUATTEST_PASSWORD, else in
// COSIGN_PASSWORD (an empty value counts), and whether either is set.
func envPassword() ([]byte, bool) {
	for _, k := range []string{"GPUATTEST_PASSWORD", "COSIGN_PASSWORD"} {
		if v, ok := os.LookupEnv(k); ok {
			return []byte(v), true
		}
	}
	return nil, false
}

// terminalIn returns c's stdin when it is a terminal, else nil.
func terminalIn(c *cobra.Command) *os.File {
	if f, ok := c.InOrStdin().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return f
	}
	return nil
}

// readPassword prompts on c's stderr and reads a password from the
// terminal tty without echo.
func readPassword(c *cobra.Command, tty *os.File, prompt string) ([]byte, error) {
	fmt.Fprint(c.ErrOrStderr(), prompt)
	b, err := term.ReadPassword(int(tty.Fd()))
	fmt.Fprintln(c.ErrOrStderr())
	if err != nil {
		return nil, fmt.Errorf("reading password: %w", err)
	}
	return b, nil
}

// newKeyPassword returns the password for a key being made: --no-password
// gives an empty one; else GPUATTEST_PASSWORD, then COSIGN_PASSWORD (an
// empty value counts); else one typed twice at a prompt when stdin is a
// terminal, and otherwise a usage error.
func newKeyPassword(c *cobra.Command, noPassword bool) ([]byte, error) {
	if noPassword {
		return []byte{}, nil
	}
	if pw, ok := envPassword(); ok {
		return pw, nil
	}
	tty := terminalIn(c)
	if tty == nil {
		return nil, usageErr("no password for the private key\nhint: set GPUATTEST_PASSWORD, run in a terminal to be prompted, or pass --no-password")
	}
	pw, err := readPassword(c, tty, "Enter password for private key: ")
	if err != nil {
		return nil, err
	}
	again, err := readPassword(c, tty, "Enter password for private key again: ")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(pw, again) {
		return nil, withCode(exitFailed, errors.New("passwords do not match"))
	}
	return pw, nil
}

// loadPrivateKey reads and decrypts the private key at path, for run
// --key, sign and rebuild --sign-key. A password in GPUATTEST_PASSWORD or
// COSIGN_PASSWORD is used as given. Without one, the empty password is
// tried first, so that a key made with --no-password never asks for one
// (a prompt stops make demo, and a job whose terminal is not in the
// foreground); only when it fails, and stdin is a terminal, is the
// password asked for, once.
func loadPrivateKey(c *cobra.Command, path string) (*sign.Keypair, error) {
	pw, fromEnv := envPassword()
	if !fromEnv {
		pw = []byte{}
	}
	kp, err := sign.LoadPrivateKey(path, pw)
	clear(pw)
	if !fromEnv && errors.Is(err, sign.ErrWrongPassword) {
		if tty := terminalIn(c); tty != nil {
			if pw, err = readPassword(c, tty, "Enter password for private key: "); err != nil {
				return nil, err
			}
			kp, err = sign.LoadPrivateKey(path, pw)
			clear(pw)
		}
	}
	if err != nil {
		if errors.Is(err, sign.ErrWrongPassword) {
			err = fmt.Errorf("%w\nhint: set GPUATTEST_PASSWORD (or COSIGN_PASSWORD) to the key's password", err)
		}
		return nil, withCode(exitFailed, err)
	}
	return kp, nil
}
