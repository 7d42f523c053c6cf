package main

import (
	"strings"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newPullCmd) }

func newPullCmd() *cobra.Command {
	var f verifyFlags
	var dest pullDest
	var to string
	c := &cobra.Command{
		Use:   "pull REF (--out DIR | --to oci-layout:DIR) (--key PUB | --certificate-identity ID --certificate-oidc-issuer URL)",
		Short: "Verify a published release, then write its files or an offline copy",
		Long: `pull fetches the release REF names (as gpuattest verify REF does, same flags
and criteria), verifies it, and only then writes: --out DIR the release's
files under DIR, by their names; --to oci-layout:DIR the release and its
bundle referrers as an OCI image layout, which gpuattest verify
oci-layout:DIR (and cosign verify-attestation --local-image) checks with no
network, e.g. on an air-gapped GPU box. Each directory must not exist or
be empty; it appears whole, or not at all: on any failure nothing is
written.

A fleet release (a dispatch among the referrers, docs/fleet.md) is verified
with the dispatch's checks, as verify REF does (--allow-simulated accepts
simulated GPUs); --out then writes its files, each a subject of the
dispatch, and --to the release with the dispatch and every node bundle.

Exit codes: 0 verified and written, 1 error, 10 signature or identity, 11
subject mismatch, 12 policy failed, 130 interrupted.`,
		Args: cobra.ExactArgs(1),
	}
	f.output = outputFlag(c)
	f.addFlags(c, "")
	rf := addRegistryFlags(c)
	rf.addReadFlags(c)
	c.Flags().StringVar(&dest.files, "out", "", "write the release's files into this new directory")
	c.Flags().StringVar(&to, "to", "", "copy the release and its referrers into oci-layout:DIR")
	c.RunE = func(c *cobra.Command, args []string) error {
		if to != "" {
			dir, ok := strings.CutPrefix(to, oci.LayoutPrefix)
			if !ok || dir == "" {
				return usageErr("--to %q: expected oci-layout:DIR", to)
			}
			dest.layout = dir
		}
		if !dest.any() {
			return usageErr("nothing to write: give --out DIR, --to oci-layout:DIR, or both\nhint: gpuattest verify REF verifies without writing")
		}
		return runVerifyRef(c, &f, rf, args, dest)
	}
	return c
}
