package main

import (
	"time"

	"github.com/gpuattest/gpuattest/attest/oci"
	"github.com/spf13/cobra"
)

// registryFlags are the flags of the verbs that talk to registries
// (push, verify REF, pull, run for a benchmark's reference.release).
type registryFlags struct {
	insecure                   []string
	jobs                       int
	connect, idle, timeout     time.Duration
	reads                      bool
	maxLayerSize, maxTotalSize int64
}

func addRegistryFlags(c *cobra.Command) *registryFlags {
	rf := &registryFlags{}
	c.Flags().StringSliceVar(&rf.insecure, "insecure-registry", nil, "registry HOST[:PORT] that may be spoken to over plain HTTP (loopback registries always may); repeatable")
	c.Flags().IntVar(&rf.jobs, "registry-jobs", oci.DefaultJobs, "blobs uploaded or fetched at once")
	c.Flags().DurationVar(&rf.connect, "registry-connect-timeout", oci.DefaultConnectTimeout, "longest a connection to a registry may take to open (dial and TLS handshake)")
	c.Flags().DurationVar(&rf.idle, "registry-idle-timeout", oci.DefaultIdleTimeout, "longest a request to a registry may wait with no byte moving")
	c.Flags().DurationVar(&rf.timeout, "registry-timeout", oci.DefaultTimeout, "longest the whole exchange with a registry may take")
	return rf
}

// addReadFlags adds the bounds of what is downloaded (verify REF, pull,
// run).
func (rf *registryFlags) addReadFlags(c *cobra.Command) {
	rf.reads = true
	c.Flags().Int64Var(&rf.maxLayerSize, "max-layer-size", oci.DefaultMaxLayerSize, "largest file (layer) of a release fetched, in bytes; a larger one is refused before anything is fetched")
	c.Flags().Int64Var(&rf.maxTotalSize, "max-total-size", oci.DefaultMaxTotalSize, "most a release's files may add up to, in bytes")
}

// options turns the flags into attest/oci options.
func (rf *registryFlags) options() ([]oci.Option, error) {
	if rf.jobs < 1 {
		return nil, usageErr("--registry-jobs %d: expected 1 or more", rf.jobs)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--registry-connect-timeout", rf.connect}, {"--registry-idle-timeout", rf.idle}, {"--registry-timeout", rf.timeout}} {
		if d.v <= 0 {
			return nil, usageErr("%s %s: expected a duration above 0, such as 30s or 10m", d.flag, d.v)
		}
	}
	opts := []oci.Option{oci.WithJobs(rf.jobs), oci.WithConnectTimeout(rf.connect), oci.WithIdleTimeout(rf.idle), oci.WithTimeout(rf.timeout)}
	if rf.reads {
		if rf.maxLayerSize < 1 || rf.maxTotalSize < 1 {
			return nil, usageErr("--max-layer-size %d, --max-total-size %d: expected 1 or more bytes", rf.maxLayerSize, rf.maxTotalSize)
		}
		opts = append(opts, oci.WithMaxLayerSize(rf.maxLayerSize), oci.WithMaxTotalSize(rf.maxTotalSize))
	}
	for _, h := range rf.insecure {
		opts = append(opts, oci.WithInsecureRegistry(h))
	}
	return opts, nil
}
