package kube_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/k8stest"
	"github.com/gpuattest/gpuattest/internal/registrytest"
	"github.com/gpuattest/gpuattest/pipeline/fleet"
	"github.com/gpuattest/gpuattest/pipeline/fleet/fleettest"
	"github.com/gpuattest/gpuattest/pipeline/fleet/kube"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// GPU products of the test cluster's kwok nodes.
const (
	a100Product = "NVIDIA-A100-SXM4-80GB"
	h100Product = "NVIDIA-H100-80GB-HBM3"
	// image is the pods' image: the kwok nodes pull nothing, and
	// fleettest.Kubelet runs the pods' commands here.
	image = "example.invalid/gpuattest@sha256:0000000000000000000000000000000000000000000000000000000000000000"
)

// kubeMain runs the package's tests with one control plane (k8stest.Main)
// of two A100 nodes and one H100 node, 8 GPUs each.
type kubeMain struct{ m *testing.M }

func (k kubeMain) Run() int {
	return k8stest.Main(k.m, k8stest.GPUNode("gpu-a100-0", a100Product, 8), k8stest.GPUNode("gpu-a100-1", a100Product, 8), k8stest.GPUNode("gpu-h100-0", h100Product, 8))
}

func TestMain(m *testing.M) { fleettest.Main(kubeMain{m}) }

// suiteFleet is the suite's two classes on the test cluster.
const suiteFleet = `apiVersion: gpuattest.dev/v1
kind: Fleet
engine: kubernetes
kubernetes:
  namespace: %s
  image: %s
  registry: %s/staging
classes:
  - {name: a100, gres: "gpu:a100:1", product: ` + a100Product + `, constraint: sm_80, targets: [sm_80], timeLimit: 5m}
  - {name: h100, gres: "gpu:h100:1", product: ` + h100Product + `, constraint: sm_90, targets: [sm_90], timeLimit: 5m}
`

// TestConformance runs the fleet's conformance suite against a local
// control plane (internal/k8stest) as the restricted user, staging
// through docker-registry, with fleettest.Kubelet running the pods'
// commands; it kills a job by failing its pod and preempts one by
// evicting it.
func TestConformance(t *testing.T) {
	c := k8stest.Shared(t)
	reg := registrytest.StartDocker(t)
	e, err := kube.New(kube.Config{Namespace: c.Namespace, Image: image}, kube.WithKubeconfig(c.Restricted.Kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	k := fleettest.NewKubelet(t, c, fleettest.NodeBinary(t))
	k.Start()
	// Each job sleeps d in its node container; its sign container exits
	// with exit. The Secret's keys are never read.
	request := func(_ *testing.T, class string, count, exit int, d time.Duration) fleet.Request {
		keys := make([][]byte, count)
		for i := range keys {
			keys[i] = []byte("unused")
		}
		return fleet.Request{Name: "gpuattest-" + class, Class: class, Count: count, Dispatch: "suite", Env: map[string]string{},
			Selectors: fleet.Selectors{GPUType: "h100", GPUs: 1, Placement: kube.Placement{Product: h100Product}}, TimeLimit: 15 * time.Minute,
			Job: fleet.ImageJob{Command: []string{"/bin/sh", "-c", fmt.Sprintf("sleep %d", int(d.Seconds()))},
				SignCommand: []string{"/bin/sh", "-c", fmt.Sprintf("exit %d", exit)}, Keys: keys}}
	}
	fleettest.Run(t, fleettest.Harness{Scheduler: e, Request: request, Unknown: "gpuattest-none-unknown/0", Timeout: 90 * time.Second,
		Jobs:    k,
		Options: []run.FleetOption{run.WithFleetAccess(fleet.Access{"kubeconfig": c.Restricted.Kubeconfig})},
		Fleet: func(t *testing.T) *fleet.Spec {
			spec, err := fleet.Parse("fleet.yaml", fmt.Appendf(nil, suiteFleet, c.Namespace, image, reg.Host))
			if err != nil {
				t.Fatal(err)
			}
			return spec
		}})
}
