package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

func init() { verbs = append(verbs, newInspectCmd) }

// inspectResult is the JSON form of one inspected file.
type inspectResult struct {
	*runtypes.Inspection
	// Problem is set when --targets was given and the file does not match.
	Problem string `json:"problem,omitempty"`
}

func newInspectCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "inspect FILE...",
		Short: "List the SASS and PTX architectures and cubin digests in CUDA binaries",
		Long: "inspect runs cuobjdump (--list-elf, --list-ptx, --extract-elf) on each file\n" +
			"(fatbin, cubin, object, executable or PTX) and prints its sha256, the SASS\n" +
			"architectures, the PTX architectures and the sha256 of every embedded cubin.\n" +
			"With --targets it exits 1 unless each file's SASS set equals those targets.",
		Example: "  gpuattest inspect build/sgemm.fatbin\n  gpuattest inspect --targets sm_80,sm_90 -o json build/*.fatbin",
		Args:    cobra.MinimumNArgs(1),
	}
	out := outputFlag(c)
	targets := c.Flags().StringSlice("targets", nil, "fail unless each file's SASS architectures equal these (e.g. sm_80,sm_90)")
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		var want []pipeline.Target
		if len(*targets) > 0 {
			ts, err := pipeline.ParseTargets(*targets)
			if err != nil {
				return usageErr("--targets: %v", err)
			}
			want = ts
		}
		if _, err := exec.LookPath("cuobjdump"); err != nil {
			return withCode(exitFailed, errors.New("cuobjdump not found in PATH\nhint: install the CUDA toolkit (Debian: apt-get install nvidia-cuda-toolkit)"))
		}
		var results []inspectResult
		failed := false
		for _, f := range args {
			in, err := run.Inspect(c.Context(), f, os.Environ())
			if err != nil {
				return withCode(exitFailed, err)
			}
			r := inspectResult{Inspection: in}
			if d := run.CheckSASS(in, want); want != nil && d != nil {
				r.Problem = fmt.Sprintf("SASS architectures [%s] do not equal --targets [%s]", strings.Join(d.Got, " "), strings.Join(d.Want, " "))
				failed = true
			}
			results = append(results, r)
		}
		w := c.OutOrStdout()
		if *out == "json" {
			if err := writeJSON(w, results); err != nil {
				return err
			}
		} else {
			for i, r := range results {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "%s\n  sha256  %s\n  size    %d\n  sass    %s\n  ptx     %s\n", textsafe.Line(r.Path), r.SHA256, r.Size, textsafe.Line(orNone(r.SASS)), textsafe.Line(orNone(r.PTX)))
				for _, cb := range r.Cubins {
					fmt.Fprintf(w, "  cubin   %-7s %s  %s\n", textsafe.Line(cb.Arch), cb.SHA256, textsafe.Line(cb.Name))
				}
				if r.Problem != "" {
					fmt.Fprintf(w, "  FAILED  %s\n", textsafe.Lines(r.Problem))
				}
			}
		}
		if failed {
			return silentExit(exitFailed)
		}
		return nil
	}
	return c
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "(none)"
	}
	return strings.Join(ss, " ")
}
