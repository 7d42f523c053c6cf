package k8stest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

// Label names a GPU node carries (NVIDIA GPU Feature Discovery's and the
// kubelet's).
const (
	GPUProductLabel = "nvidia.com/gpu.product"
	HostnameLabel   = "kubernetes.io/hostname"
	// GPUResource is the extended resource NVIDIA's device plugin
	// advertises.
	GPUResource = "nvidia.com/gpu"
)

// Node is a kwok-faked GPU node.
type Node struct {
	// Name is the node's name (and its kubernetes.io/hostname label).
	Name string
	// Labels are added to the node's (nvidia.com/gpu.product=...).
	Labels map[string]string
	// GPUs is the node's nvidia.com/gpu capacity and allocatable.
	GPUs int
}

// GPUNode is a node named name with gpus GPUs of product (the
// nvidia.com/gpu.product label, as GPU Feature Discovery writes it:
// NVIDIA-H100-80GB-HBM3).
func GPUNode(name, product string, gpus int) Node {
	return Node{Name: name, Labels: map[string]string{GPUProductLabel: product}, GPUs: gpus}
}

// AddNode creates n, has its capacity and allocatable (32 CPUs, 256 GiB,
// 110 pods and n.GPUs nvidia.com/gpu) PATCHed through nodes/status, and
// waits until kwok has made it Ready with that many GPUs allocatable and
// the node lifecycle controller has lifted the not-ready taint.
func (c *Cluster) AddNode(ctx context.Context, n Node) error {
	if n.Name == "" || n.GPUs < 0 {
		return fmt.Errorf("k8stest: node %+v: want a name and GPUs >= 0", n)
	}
	labels := map[string]string{HostnameLabel: n.Name, "kubernetes.io/os": "linux", "type": "kwok"}
	maps.Copy(labels, n.Labels)
	obj := map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": n.Name, "labels": labels,
			"annotations": map[string]string{"kwok.x-k8s.io/node": "fake"}},
	}
	if err := c.Admin.Do(ctx, http.MethodPost, "/api/v1/nodes", obj, nil); err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	res := map[string]string{"cpu": "32", "memory": "256Gi", "pods": "110", GPUResource: strconv.Itoa(n.GPUs)}
	patch := map[string]any{"status": map[string]any{"capacity": res, "allocatable": res}}
	path := "/api/v1/nodes/" + n.Name
	// kwok's node-initialize keeps a status.allocatable it finds, and a
	// merge patch keeps what kwok wrote beside ours; whichever comes
	// first, the loop re-PATCHes until both hold.
	return poll(ctx, "node "+n.Name+" to be Ready with its GPUs", nil, func(ctx context.Context) error {
		var node struct {
			Spec struct {
				Taints []struct{ Key, Effect string }
			}
			Status struct {
				Allocatable map[string]string
				Conditions  []struct{ Type, Status string }
			}
		}
		if err := c.Admin.Do(ctx, http.MethodGet, path, nil, &node); err != nil {
			return err
		}
		if node.Status.Allocatable[GPUResource] != res[GPUResource] || node.Status.Allocatable["cpu"] != res["cpu"] {
			if err := c.Admin.Do(ctx, http.MethodPatch, path+"/status", patch, nil); err != nil {
				return fmt.Errorf("patching the status of node %s: %w", n.Name, err)
			}
			return fmt.Errorf("allocatable %v", node.Status.Allocatable)
		}
		ready := slices.ContainsFunc(node.Status.Conditions, func(c struct{ Type, Status string }) bool {
			return c.Type == "Ready" && c.Status == "True"
		})
		if !ready {
			return fmt.Errorf("not Ready: %v", node.Status.Conditions)
		}
		if len(node.Spec.Taints) > 0 {
			return fmt.Errorf("still tainted %v", node.Spec.Taints)
		}
		return nil
	})
}
