package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/spf13/cobra"
)

// Exit codes, documented in docs/exit-codes.md.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitRetry   = 3  // fleet sign: the registry failed; the job may run again
	exitSig     = 10 // verify: signature or identity
	exitSubject = 11 // verify: subject mismatch
	exitPolicy  = 12 // verify: policy failed
	exitDiffer  = 13 // rebuild: a rebuilt artifact differs from its subject

	exitInterrupted = 130 // verify: stopped by SIGINT or SIGTERM
)

// verifyExit maps a verification's failure to the exit code docs/exit-codes.md
// documents.
func verifyExit(f verify.Failure) int {
	switch f {
	case verify.FailureNone:
		return exitOK
	case verify.FailureSignature:
		return exitSig
	case verify.FailureSubject:
		return exitSubject
	case verify.FailurePolicy:
		return exitPolicy
	}
	return exitFailed
}

// exitError carries the exit code a command wants. When silent is set the
// command already printed what the user needs and main prints nothing more.
type exitError struct {
	code   int
	err    error
	silent bool
}

// Error returns the wrapped error's text.
func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// Unwrap returns the wrapped error.
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks bad input (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// withCode wraps err with an exit code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// silentExit reports a failure the command has already rendered.
func silentExit(code int) error { return &exitError{code: code, silent: true} }

// verbs lists the constructors of the top-level commands; each verb's file
// adds itself in an init function.
var verbs []func() *cobra.Command

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "gpuattest",
		Short:         "Reproducible, attested GPU kernel releases",
		Long:          "gpuattest builds CUDA kernels for pinned targets inside digest-pinned images,\nruns validation, benchmark and burn-in suites on the GPU, and emits signed\nin-toto attestations that third parties verify offline against a policy.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: fmt.Errorf("%w\nhint: see '%s --help'", err, c.CommandPath())}
	})
	for _, v := range verbs {
		root.AddCommand(v())
	}
	return root
}

// execute runs the CLI and returns the process exit code.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.silent && ee.err != nil {
			fmt.Fprintf(stderr, "gpuattest: %s\n", textsafe.Lines(ee.err.Error()))
		}
		return ee.code
	}
	// Errors quote the files they are about: escaped, as all text output.
	fmt.Fprintf(stderr, "gpuattest: %s\n", textsafe.Lines(err.Error()))
	// cobra's own argument errors (unknown command, wrong arg count) are usage errors.
	if isCobraUsage(err) {
		return exitUsage
	}
	return exitFailed
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires at most", "invalid argument", "flag needs an argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// outputFlag adds -o/--output to c and returns where its value lands.
func outputFlag(c *cobra.Command) *string {
	var o string
	c.Flags().StringVarP(&o, "output", "o", "text", "output format: text or json")
	return &o
}

// checkOutput validates an -o value.
func checkOutput(o string) error {
	if o != "text" && o != "json" {
		return usageErr("-o %q: expected text or json", o)
	}
	return nil
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
