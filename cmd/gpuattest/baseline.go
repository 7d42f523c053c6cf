package main

import (
	"fmt"

	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newBaselineCmd) }

func newBaselineCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "baseline",
		Short: "Manage benchmark baselines",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newBaselineSaveCmd())
	return c
}

func newBaselineSaveCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "save RUNDIR --out FILE",
		Short: "Write a baseline from a run directory's benchmark step",
		Long: `save reads RUNDIR/steps/<id>/benchmark.json (the run's only benchmark step,
or --step ID) and RUNDIR/hardware.json, and writes a baseline file carrying
the raw samples per case with the hardware digest, GPU model and backend.
Later benchmark steps (baseline: + gate:) and gpuattest compare gate on it.`,
		Args: cobra.ExactArgs(1),
	}
	var outFile, stepID string
	c.Flags().StringVar(&outFile, "out", "", "baseline file to write")
	c.Flags().StringVar(&stepID, "step", "", "benchmark step id (needed when the run has several)")
	out := outputFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		if outFile == "" {
			return usageErr("baseline save needs --out FILE")
		}
		b, err := run.SaveBaseline(args[0], stepID)
		if err != nil {
			return withCode(exitFailed, err)
		}
		if err := b.Write(outFile); err != nil {
			return withCode(exitFailed, err)
		}
		if *out == "json" {
			return writeJSON(c.OutOrStdout(), map[string]any{
				"out": outFile, "step": b.Source.Step, "cases": len(b.Cases), "hardware": b.Hardware,
			})
		}
		n := 0
		for _, k := range b.Cases {
			n += len(k.SamplesNS)
		}
		_, err = fmt.Fprintf(c.OutOrStdout(), "wrote %s: %d cases, %d samples from step %s (%s)\n", textsafe.Line(outFile), len(b.Cases), n, textsafe.Line(b.Source.Step), textsafe.Line(fmt.Sprint(b.Hardware)))
		return err
	}
	return c
}
