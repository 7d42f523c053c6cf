// Package kube is the Kubernetes engine of the fleet (fleet.Scheduler): one
// Indexed Job per class, one completion index per node, scheduled by the
// nodes' nvidia.com/gpu capacity and GPU Feature Discovery's product
// label.
//
// Each pod runs two containers of the fleet's image: "node", which pulls
// the staged dispatch from the registry by digest, checks it and runs the
// GPU steps with the class's GPUs, and "sign", the only one that mounts
// the class's Secret of job keys; it signs what "node" reported and
// pushes the node bundle. Steps run in "node" and never see the Secret,
// the service-account token (never mounted) or the other container's
// files (see docs/fleet.md for the trust model).
//
// The engine talks to the API server through client-go's REST client
// with a scheme of core/v1 and batch/v1 only (not the full clientset,
// whose init registers every API group), with credentials from the
// kubeconfig as kubectl finds it.
package kube
