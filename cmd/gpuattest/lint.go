package main

import (
	"errors"
	"fmt"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newLintCmd) }

type lintFile struct {
	File     string             `json:"file"`
	OK       bool               `json:"ok"`
	Problems []pipeline.Problem `json:"problems"`
}

func newLintCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "lint FILE...",
		Short: "Check pipeline files and report every problem with its position",
		Long: "lint decodes and validates each pipeline file and reports every problem at once,\n" +
			"each as file:line:col with the offending line and a hint. Exit 1 when any file has a problem.",
		Args: cobra.MinimumNArgs(1),
	}
	out := outputFlag(c)
	root := rootFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		var results []lintFile
		bad := false
		for _, f := range args {
			r := lintFile{File: f, OK: true, Problems: []pipeline.Problem{}}
			if _, err := loadPipeline(f, *root); err != nil {
				var probs pipeline.Problems
				if !errors.As(err, &probs) {
					return withCode(exitUsage, err)
				}
				r.OK, r.Problems, bad = false, probs, true
			}
			results = append(results, r)
		}
		if *out == "json" {
			if err := writeJSON(c.OutOrStdout(), results); err != nil {
				return err
			}
		} else {
			w := c.OutOrStdout()
			n := 0
			for _, r := range results {
				if r.OK {
					fmt.Fprintf(w, "%s: ok\n", r.File)
					continue
				}
				for _, p := range r.Problems {
					fmt.Fprintln(w, p.String())
					n++
				}
			}
			if bad {
				fmt.Fprintf(c.ErrOrStderr(), "%d problem%s found\n", n, plural(n))
			}
		}
		if bad {
			return silentExit(exitFailed)
		}
		return nil
	}
	return c
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
