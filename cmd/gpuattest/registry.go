package main

import (
	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/spf13/cobra"
)

// registryFlags are the flags of the verbs that talk to registries
// (push, verify REF, pull).
type registryFlags struct {
	insecure []string
	jobs     int
}

func addRegistryFlags(c *cobra.Command) *registryFlags {
	rf := &registryFlags{}
	c.Flags().StringSliceVar(&rf.insecure, "insecure-registry", nil, "registry HOST[:PORT] that may be spoken to over plain HTTP (loopback registries always may); repeatable")
	c.Flags().IntVar(&rf.jobs, "registry-jobs", oci.DefaultJobs, "blobs uploaded or fetched at once")
	return rf
}

// options turns the flags into attest/oci options.
func (rf *registryFlags) options() ([]oci.Option, error) {
	if rf.jobs < 1 {
		return nil, usageErr("--registry-jobs %d: expected 1 or more", rf.jobs)
	}
	opts := []oci.Option{oci.WithJobs(rf.jobs)}
	for _, h := range rf.insecure {
		opts = append(opts, oci.WithInsecureRegistry(h))
	}
	return opts, nil
}
