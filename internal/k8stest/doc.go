// Package k8stest starts a real Kubernetes control plane on 127.0.0.1 for
// tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
// built from the Go module proxy by .ci/k8s, with kwok faking the nodes and
// their kubelets. Only the nodes are fake (a process and hardware boundary):
// a Job submitted here is stored by the real apiserver, its pods are made by
// the real job controller, placed by the real scheduler by GPU capacity and
// node labels, and deleted by the real garbage collector.
//
// kwok runs no containers. Its stages (kwok's own node-initialize,
// node-heartbeat, pod-ready and pod-delete, shipped in its module download)
// take a scheduled pod to Running and keep it there; the test runs the
// node-side command itself, with the environment and files Pod reports, and
// ends the pod with FinishPod or FailPod, as a kubelet would.
//
// The package uses the standard library only (net/http and encoding/json
// against the apiserver's REST API), so that it adds nothing to go.mod.
//
// Gotchas measured with Kubernetes v1.37.2: the apiserver needs
// --endpoint-reconciler-type=none to serve on 127.0.0.1; the
// controller-manager takes the long controller names (job-controller);
// kwok refuses to start without stage files; a node's nvidia.com/gpu
// capacity is only taken through the nodes/status subresource.
package k8stest
