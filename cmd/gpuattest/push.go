package main

import (
	"fmt"

	"github.com/gpuattest/gpuattest/internal/textsafe"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newPushCmd) }

func newPushCmd() *cobra.Command {
	var allowFailed bool
	c := &cobra.Command{
		Use:   "push RUNDIR REF",
		Short: "Publish a signed run's artifacts and attestations to an OCI registry",
		Long: `push publishes the released artifacts of the signed run in RUNDIR to REF
(REGISTRY/REPOSITORY[:TAG]) as one OCI artifact (artifactType
application/vnd.gpuattest.release.v1+json, one layer per file titled with
its subject name), and each Sigstore bundle of attestations.intoto.jsonl as
a referrer of it in cosign v3's layout: through the registry's referrers
API, or the OCI tag schema (a sha256-<hex> index) where it has none. The
manifest's digest is a subject of the attestations, so cosign
verify-attestation and gpuattest verify check REF@DIGEST.

It prints the pushed digest. Pushing the same run again writes nothing and
prints the same digest; after an interrupted push it completes what is
missing. A run that did not pass is refused unless --allow-failed.
Credentials come from Docker's config and credential helpers; plain HTTP
only to loopback registries and --insecure-registry hosts.

Exit status: 0 pushed, 1 refused or failed, 2 usage.`,
		Args: cobra.ExactArgs(2),
	}
	output := outputFlag(c)
	rf := addRegistryFlags(c)
	c.Flags().BoolVar(&allowFailed, "allow-failed", false, "publish a run that did not pass (its attestations say so)")
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := checkOutput(*output); err != nil {
			return err
		}
		ropts, err := rf.options()
		if err != nil {
			return err
		}
		opts := []run.PushOption{run.WithRegistryOptions(ropts...)}
		if allowFailed {
			opts = append(opts, run.AllowFailed())
		}
		res, err := run.Push(c.Context(), args[0], args[1], opts...)
		if err != nil {
			if c.Context().Err() != nil {
				return withCode(exitFailed, fmt.Errorf("interrupted: %w\nhint: push again to complete it", err))
			}
			return withCode(exitFailed, err)
		}
		w := c.OutOrStdout()
		if *output == "json" {
			return writeJSON(w, res)
		}
		fmt.Fprintf(w, "Pushed %d file(s) and %d bundle(s) (%d written; %s) to %s\n", res.Files, res.Bundles, res.Written, res.Referrers, textsafe.Line(args[1]))
		fmt.Fprintln(w, textsafe.Line(res.Ref))
		return nil
	}
	return c
}
