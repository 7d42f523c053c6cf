package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/coordinate"
	"github.com/gpuattest/gpuattest/pipeline/fleet/node"
	"github.com/spf13/cobra"
)

// kubeFlags are the Kubernetes engine's command-line settings.
type kubeFlags struct {
	kubeconfig, context string
}

func (k *kubeFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "Kubernetes: the kubeconfig file (the fleet file's kubernetes.kubeconfig, $KUBECONFIG or ~/.kube/config when omitted)")
	c.Flags().StringVar(&k.context, "context", "", "Kubernetes: the kubeconfig context (the fleet file's kubernetes.context, or the current one, when omitted)")
}

// mountDirs are the key and report directories of a job's pod: the
// mounts, or where GPUATTEST_FLEET_KEY_DIR and GPUATTEST_FLEET_REPORT_DIR
// move them (tests that run a pod's commands outside a pod).
func mountDirs() (keys, report string) {
	return cmp.Or(os.Getenv("GPUATTEST_FLEET_KEY_DIR"), fleet.KeyMount), cmp.Or(os.Getenv("GPUATTEST_FLEET_REPORT_DIR"), fleet.ReportMount)
}

// podNode fills n's job ID and node name from a pod's environment, as
// the engine that made the pod set them.
func podNode(n *node.Config) {
	jobID, nodeName := fleet.NodeIdentity(os.Environ())
	n.JobID, n.NodeName = jobID, cmp.Or(nodeName, n.NodeName)
}

// reportNode is fleet node --release: the node container's side.
func reportNode(c *cobra.Command, n node.Config, ref, class string, idx int, rf *registryFlags) error {
	opts, err := rf.options()
	if err != nil {
		return err
	}
	podNode(&n)
	keys, report := mountDirs()
	work, err := os.MkdirTemp("", "gpuattest-job-")
	if err != nil {
		return err
	}
	pred, err := node.Report(c.Context(), n, node.Release{Ref: ref, Class: class, Index: idx, Work: work, ReportDir: report, KeyDir: keys, Options: opts})
	if pred != nil {
		fmt.Fprintf(c.OutOrStdout(), "job %s-%d on %s: %s; report in %s\n", class, idx, n.NodeName, pred.Result, report)
	}
	if err != nil {
		return withCode(exitFailed, err)
	}
	return nil
}

func newFleetSignCmd() *cobra.Command {
	var release string
	var registry *registryFlags
	c := &cobra.Command{
		Use:   "sign CLASS",
		Short: "Sign and publish a Kubernetes job's node bundle (the pod's sign container runs it)",
		Long: "sign is the sign container of a fleet job's pod on Kubernetes, the only one that mounts\n" +
			"the job keys (" + fleet.KeyMount + "/<index>.key). It pulls the dispatch by digest,\n" +
			"checks that its key is the one the dispatch delegated to job CLASS-$" + fleet.IndexEnv + ",\n" +
			"waits for the node container's report in " + fleet.ReportMount + ", signs it and pushes the\n" +
			"node bundle to the staging repository.\n\n" +
			"Exit status: 0 the node passed, 1 it failed (its bundle says why), 2 bad input (a\n" +
			"key that is not the job's), 3 the registry failed or it was stopped: the Job runs\n" +
			"the index again (its podFailurePolicy fails the index at once on 1 and 2).",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			idx, err := strconv.Atoi(os.Getenv(fleet.IndexEnv))
			if err != nil {
				return usageErr("$%s is %q: expected the job's index", fleet.IndexEnv, os.Getenv(fleet.IndexEnv))
			}
			release = cmp.Or(release, os.Getenv(coordinate.ReleaseEnv))
			if release == "" {
				return usageErr("no staged dispatch: give --release or $%s", coordinate.ReleaseEnv)
			}
			opts, err := registry.options()
			if err != nil {
				return err
			}
			n := node.Config{}
			podNode(&n)
			keys, report := mountDirs()
			work, err := os.MkdirTemp("", "gpuattest-sign-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			pred, err := node.Sign(c.Context(), n, node.Release{Ref: release, Class: args[0], Index: idx, Work: work, ReportDir: report, KeyDir: keys, Options: opts})
			if pred != nil {
				fmt.Fprintf(c.OutOrStdout(), "job %s-%d on %s: %s; node bundle pushed\n", args[0], idx, n.NodeName, pred.Result)
			}
			switch {
			case err == nil:
				return nil
			case errors.Is(err, node.ErrNodeFailed):
				return withCode(exitFailed, err)
			case errors.Is(err, node.ErrRegistry) || c.Context().Err() != nil:
				return withCode(exitRetry, err) // the index may run again
			}
			return withCode(exitUsage, err) // a key or dispatch that will not change
		},
	}
	c.Flags().StringVar(&release, "release", "", "the staged dispatch by digest ($"+coordinate.ReleaseEnv+" when omitted)")
	registry = addRegistryFlags(c)
	return c
}
